/*
 * broker.h: the broker's state and the request object that moves through it.
 *
 * One network thread runs a libev loop: it accepts connections and reads frames (server/net.c), decodes
 * each and picks its API row (server/dispatch.c), runs the handler and carries the request to its answer
 * (server/request.c). A handler either answers at once or declares what its request waits for (gr_req_await,
 * and request.c keeps it parked: acks=-1 waiting until committed, a long-poll fetch waiting for data, a
 * fetch waiting for the I/O pool to read cold data);
 * a parked request waits on named conditions of its partitions (gr_req_wait_committed, gr_req_wait_data,
 * gr_req_wait_log_start: partition/partition.h) and is re-checked only when one of them holds, and by its
 * own deadline. Blocking disk work (cold reads, statvfs) runs on the I/O pool (storage/iopool.h), whose
 * completions come back to the loop through an ev_async (server/broker.c). Responses leave a connection
 * strictly in request order: a finished response waits behind an unfinished earlier one.
 * Calls between these files go one way: net -> dispatch -> request, net -> request, dispatch -> groups ->
 * request, request -> broker; request.c reaches the connection only through b->req_sink, and a handler only
 * through its API row.
 * Invariants: a request belongs to exactly one connection (or none once the connection is gone, then it
 * is freed when it finishes); its frame, arena and output chain live until its response is fully sent.
 * Read next: server/request.c, server/net.c (connections), server/apis.def (API list), server/dispatch.c,
 * server/handlers/.
 */
#ifndef GR_BROKER_H
#define GR_BROKER_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/arena.h"
#include "cluster/features.h"
#include "common/limits.h"
#include "partition/partition.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "server/apis.h"
#include "server/config.h"
#include "server/fetch_session.h"
#include "server/logwait.h"
#include "server/metrics.h"
#include "server/netlimits.h"
#include "server/request_metrics.h"
#include "server/scram_store.h"
#include "storage/iopool.h"
#include "storage/log.h"
#include "storage/store.h"

struct gr_conn;
struct gr_oauth_login;
struct gr_req;
struct gr_req_wait;
struct gr_req_state_slot;
struct gr_broker;
struct gr_groups;
struct gr_txns;
struct gr_txn_coord;
struct gr_coordinator;
struct gr_producer_id_manager;
struct gr_producer_ids_etcd;
struct gr_image;
struct gr_member;
struct gr_security_etcd;
struct gr_controller;
struct gr_ctl_lease;
struct gr_replicas;
struct gr_roles;
struct gr_broker_client;
struct gr_fetcher;
struct gr_sasl;
struct gr_sasl_listener;
struct gr_remote_summary;
struct gr_isr_writer;
struct gr_topic_writer;

/* Handler results. */
enum gr_handler_rc {
    GR_HANDLER_DONE = 0,        /* response struct filled: encode and send */
    GR_HANDLER_WAIT = 1,        /* waiting (gr_req_await): a re-check, expire or done hook will finish it */
    GR_HANDLER_NO_RESPONSE = 2, /* acks=0 produce: nothing is sent */
    GR_HANDLER_CLOSE = 3,       /* close the connection (e.g. acks=0 produce hit an error) */
};

typedef enum gr_handler_rc (*gr_handler_fn)(struct gr_req *req);

/* One API row, generated from server/apis.def (server/apis.c): drives dispatch and the ApiVersions response.
 */
struct gr_api {
    int16_t api_key; /* GR_API_<ID> (server/apis.h) */
    const char *name;
    int16_t advertised_min; /* differs from served_min only for Produce (advertised from v0) */
    int16_t served_min, served_max;
    gr_handler_fn handler;
    bool needs_groups; /* served by the group coordinator: dispatch has gr_groups_defer start it first */
};

/* A retained file range the request holds until it is freed: the content of a file-kind records field
 * of its response (gr_req_own_slice). Pool work kept pinned is in req->cold. */
struct gr_req_slice {
    struct gr_log_slice slice;
    struct gr_req_slice *next;
};

/* One request, from its frame to its sent answer. Only generic request machinery lives here: who it belongs
 * to, its frame and decoded header/body/response, its arena, its parked state and its output chain; a
 * module's own per-request state goes in a state slot (gr_req_state). Made by net.c, decoded by dispatch.c,
 * parked, finished, encoded and freed by request.c. */
struct gr_req {
    struct gr_broker *broker;
    struct gr_conn *conn;                 /* NULL once the connection is gone */
    struct gr_req *next;                  /* connection FIFO */
    struct gr_req *wait_prev, *wait_next; /* broker's parked list */
    struct gr_req_wait *waits;            /* partition waits (arena), see gr_req_wait_committed */
    ev_timer deadline_w;                  /* the parked deadline (inactive without one) */
    bool parked;
    bool done; /* response ready (or none needed) */
    bool no_response;
    bool held;          /* read but not dispatched: waits to reach its connection's FIFO head (net.c) */
    bool before_append; /* a Produce parked before its append (its transaction's verification,
                           gr_req_await_verified; a log not made yet, handlers/produce.c): its connection's
                           later Produces are held (net.c) */
    uint8_t *frame;     /* the request bytes after the size prefix (owned; freed once answered) */
    size_t frame_len;
    int64_t pool_bytes;   /* frame bytes taken from the broker's request pool (given back once answered) */
    int64_t answer_bytes; /* memory of the built answer (response bytes and arena) counted as unsent */
    struct gr_request_header hdr;
    const struct gr_api *api;
    const struct gr_msg_ops *req_ops, *resp_ops;
    void *body; /* decoded request struct (in arena) */
    void *resp; /* response struct (in arena), initialised to defaults */
    struct gr_arena arena;
    /* parked state */
    bool (*recheck)(struct gr_req *req); /* returns true when it finished the request */
    void (*expire)(struct gr_req *req);  /* deadline reached: finish with what is there */
    int64_t deadline_ms;                 /* monotonic */
    void *hstate;                        /* the API handler's own state (arena) */
    struct gr_req_state_slot *states;    /* other modules' per-request state (arena, gr_req_state) */
    /* output: the response goes out as chunks (protocol/wire.h), memory and sendfile ranges */
    struct gr_req_slice *slices; /* the file ranges its records fields name (gr_req_own_slice) */
    struct gr_cold cold; /* the request's cold-read engine (partition/partition.h): its rounds, its pins */
    uint8_t *out_mem;
    size_t out_mem_bytes;
    struct gr_chunk *chunks;
    int chunk_count;
    int chunk_at;     /* first chunk not fully sent */
    size_t chunk_off; /* bytes of chunks[chunk_at] already sent */
    /* when it was read, dispatched, parked, answered and sent (server/request_metrics.h) */
    struct gr_req_times times;
};

/* One bound listener: NAME://host:port from `listeners`, and what Metadata tells clients that came in
 * through it (its entry in `advertised.listeners`, else its own address). */
struct gr_listener {
    struct gr_broker *broker;
    char name[64];
    char host[256];
    int32_t port; /* the bound port (port 0 in the config binds a free one) */
    char adv_host[256];
    int32_t adv_port;
    int fd;
    ev_io w;
    struct ssl_ctx_st *tls_ctx;           /* security protocol SSL or SASL_SSL: its context (server/tls.h) */
    struct gr_sasl_listener *sasl;        /* SASL_PLAINTEXT or SASL_SSL: its mechanisms (server/sasl.h) */
    struct gr_ssl_rules *principal_rules; /* with tls_ctx: ssl.principal.mapping.rules (ssl_principal.h) */
    uint64_t tls_connections[2];          /* TLS handshakes finished, by send path (enum gr_tls_send_path,
                                             server/tls.h):          gregor_tls_connections_total */
};

/* What request.c tells a request's connection (set by gr_net_init in b->req_sink; NULL in unit tests that
 * run handlers without connections): it is called only for a request whose connection is still there,
 * except released, which runs for every freed request. */
struct gr_req_sink {
    void (*answered)(struct gr_req *req); /* the answer is built (or none is due): account for it, send */
    void (*released)(struct gr_req *req); /* the request is being freed: give back what it held */
    void (*close)(struct gr_req *req, const char *why); /* close the request's connection */
    const char *(*peer)(const struct gr_req *req);      /* the connection's peer, for log lines */
    const char *(*principal)(const struct gr_req *req); /* gr_conn_principal (NULL: User:ANONYMOUS) */
    const char *(*host)(const struct gr_req *req);      /* gr_conn_host (NULL: "") */
};

/* The broker, owned by the network thread: its configuration, store and partitions, the loop and its
 * bridges from other threads (broker.c), the parked requests (request.c), the connections and their memory
 * bounds (net.c), and the bindings of the coordinators (b->coord and b->groups: groups.c; b->producer_ids:
 * handlers/init_producer_id.c). */
struct gr_broker {
    struct gr_config cfg;
    struct ev_loop *loop;
    struct gr_store *store;
    struct gr_coordinator *coord;
    struct gr_image *image;      /* what this broker knows about the cluster (cluster/image.h): read through
                                    server/route.h; fed by cluster/local.h in single-node mode */
    struct gr_authorizer *authz; /* authorizer.class.name set: the ACLs (server/acls.h); NULL = no checks */
    char *acls_dir;              /* with authz: the directory of its file */
    struct gr_topic_writer *topic_writer; /* every topic change goes through it (cluster/topic_writer.h) */
    struct gr_producer_id_manager *producer_ids;    /* InitProducerId's ids (server/producer_ids.c) */
    struct gr_producer_ids_etcd *producer_ids_etcd; /* cluster mode: their source, owning producer_ids */
    struct gr_security_etcd *security_etcd; /* cluster mode: ACLs and SCRAM in etcd (security_etcd.h) */
    struct gr_member *member; /* cluster mode: registration and the image's etcd feed (server/membership.c);
                                 NULL in single-node mode */
    struct gr_scram_store scram;      /* SCRAM credentials (server/scram_store.h), read at start, changed by
                                         AlterUserScramCredentials once the file holding the change is written */
    struct gr_controller *controller; /* cluster mode: this broker's controller (cluster/controller.h) */
    struct gr_ctl_lease *ctl_lease;   /* cluster mode: the controller key's lease (cluster/ctl_lease.h) */
    struct gr_replicas *replicas;     /* cluster mode: local replicas follow the image (cluster/replicas.h) */
    struct gr_roles *roles; /* cluster mode: local partitions take the image's roles (cluster/roles.h) */
    struct gr_isr_writer
        *isr_writer; /* cluster mode: the ISR changes of partitions led here (isr_writer.h) */
    struct gr_broker_client *broker_client; /* cluster mode: connections to other brokers (broker_client.h) */
    struct ssl_ctx_st *ib_tls_ctx;          /* the inter-broker listener is SSL: the client context of those
                                               connections (server/tls.h gr_tls_client_ctx_new; a
                                               certificate reload replaces it, server/tls_reload.h);
                                               NULL: PLAINTEXT */
    bool ib_tls_verify_host;                /* its ssl.endpoint.identification.algorithm is https */
    /* the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (server/sasl.h gr_sasl_inter_broker_setup): the
       mechanism (static name), this broker's username and password (malloc'd); NULL: no SASL */
    const char *ib_sasl_mechanism;
    char *ib_sasl_username, *ib_sasl_password;
    struct gr_oauth_login *ib_oauth_login; /* OAUTHBEARER: this broker's token maker (common/oauth_login.h) */
    struct gr_fetcher *fetcher; /* cluster mode: followers copy their leaders' logs (cluster/fetcher.h) */
    struct gr_remote_summary *remote_summary; /* cluster mode: other leaders' partition summaries for the
                                                 lag families (server/metrics_remote.h) */
    struct {                                  /* cluster mode: topic configs of the image to local topics */
        bool busy;               /* one gr_topic_op_set_configs in flight (server/membership.c) */
        uint8_t failed_id[16];   /* the last topic whose configs the store refused ... */
        int64_t failed_revision; /* ... at this record revision: not retried until the record changes */
    } config_sync;
    int32_t node_id;
    struct gr_listener listeners[GR_LISTENERS_MAX];
    int listener_count;
    ev_async flush_async;
    ev_async io_async;          /* the I/O pool has completions */
    struct gr_iopool *iopool;   /* gregor.io.threads threads: cold reads, statvfs */
    pthread_mutex_t flushed_mu; /* guards flushed[]: logs reported by flusher threads, not yet woken */
    struct gr_log **flushed;
    int flushed_count, flushed_cap;
    struct gr_partitions *parts; /* the partitions this (network) thread owns (partition/partition.h) */
    /* KIP-227 incremental fetch sessions (server/fetch_session.h) and what they count for /metrics */
    struct gr_fsess_cache *fetch_sessions;
    struct gr_fsess_counts fetch_session_counts;
    int64_t rechecks;            /* recheck calls made (a measure for tests and debug logs) */
    ev_timer housekeeping_timer; /* retention, checkpoints, idle connections */
    ev_signal sigterm_w, sigint_w;
    struct gr_req *parked_head;  /* parked requests (request.c) */
    struct gr_logwaits logwaits; /* requests waiting until a local log is made (server/logwait.h) */
    int parked_count;
    const struct gr_req_sink *req_sink; /* the connections' side of a request (net.c) */
    int conn_count;
    struct gr_conn *conns; /* all live connections (for idle checks and shutdown) */
    /* Connection memory bounds (net.c). */
    struct gr_mempool request_pool; /* queued.max.request.bytes: frames, from size prefix to answer */
    struct gr_mempool unsent_pool;  /* gregor.unsent.bytes.max: answers built and not yet sent */
    int64_t conn_unsent_bytes_max;  /* gregor.connection.unsent.bytes.max */
    int64_t conn_frame_bytes_max;   /* socket.request.max.bytes: unanswered frames per connection */
    struct gr_conn *stalled_head;   /* connections not reading because of a limit, re-checked on releases */
    int stalled_count;
    struct gr_conn **resume_buf; /* the stalled list copied for one re-check pass */
    int resume_cap;
    ev_timer resume_w;                 /* the re-check pass, run from the loop's top level */
    int64_t released_since_trim_bytes; /* freed frame, answer and connection bytes not yet given back by
                                          malloc_trim */
    /* Out of descriptors (net.c): the listeners back off and a spare descriptor refuses waiting clients. */
    struct gr_accept_episode accept_ep;
    ev_timer accept_w; /* the listeners' back-off */
    int spare_fd;      /* /dev/null, given up to accept-and-close while out of descriptors */
    int64_t last_retention_ms;
    int64_t last_checkpoint_ms;
    int64_t last_producer_expiry_ms;
    bool stopping;
    /* Controlled shutdown (membership.c gr_membership_shutdown_begin): waiting for the controller to move
       this broker's leaderships away, since started_ms (monotonic); the last count logged; the deadline. */
    struct {
        bool waiting;
        int64_t started_ms;
        int32_t logged_count;
        ev_timer deadline_w;
    } ctl_shutdown;
    struct gr_groups *groups; /* the group coordinator's server binding (groups.c), NULL until first used */
    /* the transaction coordinator (coordinator/txn.h) and its server binding (txns.c): NULL until
       __transaction_state exists (issue #21) */
    struct gr_txn_coord *txn;
    struct gr_txns *txns;
    struct gr_metrics metrics;   /* request and topic counters (server/metrics.h), network thread only */
    struct gr_admin_http *admin; /* gregor.admin.listeners (server/admin_http.h), NULL when disabled */
    bool ready;                  /* start-up done (and registered, in a cluster): /v1/status/ready 200 */
    /* One node's finalized features (cluster/features.h): the gregor-features file as last submitted for
       writing (UpdateFeatures decides against it, so writes queued one behind the other each raise the epoch;
       the image takes each one's level and epoch once it is durable). Unused in cluster mode (etcd's key). */
    struct gr_features_file features_file;
};

/* ---- the request lifecycle (request.c) ---- */

/* Parks `req` (not parked) in its broker's parked list until it is finished or unparked: its waits' done
 * hooks run req->recheck (true when it finished the request); at `deadline_ms` (monotonic; INT64_MAX for
 * none) req->expire runs. For request.c and the group binding's defer (groups.c), which parks a request
 * before its handler runs; handlers never park (they declare their wait with gr_req_await; scripts/lint.py
 * checks this). */
void gr_req_park(struct gr_req *req, int64_t deadline_ms);
/* What a handler's request waits for (gr_req_await): `recheck` runs when one of its waits fires (true when
 * it finished the request), `expire` when the deadline passes (it finishes the request with what is
 * there). The deadline is armed only with an `expire`: `timeout_ms` milliseconds from now (monotonic;
 * negative counts as 0). All zero: the request waits with no re-check and no deadline (a done hook of a
 * coordinator waiter or pool job finishes it). */
struct gr_await {
    bool (*recheck)(struct gr_req *req);
    void (*expire)(struct gr_req *req);
    int64_t timeout_ms;
};
/* Declares that the running request `req` waits as `a` says (NULL: as all zero) and returns
 * GR_HANDLER_WAIT for the handler to return. request.c keeps it parked (gr_req_run parks every request
 * before its handler runs; a handler called otherwise is parked here) and arms the deadline. Call it
 * before any call that may finish the request (a wait already satisfied, a coordinator answering inside
 * the call): a request already finished is left alone (never parked or armed again). Called again (e.g.
 * after Produce's gate), the new re-check, expire and deadline replace the old ones. */
enum gr_handler_rc gr_req_await(struct gr_req *req, const struct gr_await *a);
/* A parked request's wait on one partition (arena): the done hook re-checks the request. */
struct gr_req_wait {
    struct gr_partition_waiter w;
    struct gr_req *req;
    struct gr_partition *part;
    struct gr_req_wait *next; /* the request's other waits (gr_req_unpark cancels them all) */
    bool data;                /* an until-data wait: queued again past what its isolation reads now when
                                 the re-check did not finish the request */
    bool arming;              /* inside its wait call: a done at once is noted, not re-checked */
    bool held_at_once;
};
/* Makes the parked `req` wait on a named condition of `log`'s partition (partition/partition.h); when the
 * condition holds (or fails) req->recheck runs; the waits end when the request is unparked. Call after
 * gr_req_await (or from inside the handler, where the request is parked). Return 1 when queued, 0 when the
 * condition already holds or failed (nothing queued, no re-check made: the caller re-checks), -ENOMEM when
 * out of arena memory (the deadline still ends the wait). committed: the visible offset reaches end_offset
 * (acks=-1, OffsetCommit); data: data arrives past what a fetch under `iso` reads now (the visible offset for
 * consumers, the log end offset for followers: gr_partition_wait_fetchable), waited again after each
 * re-check that did not finish (long poll); log start: the log-start-offset checkpoint `ticket` is durable
 * (DeleteRecords); low watermark: the partition's low watermark reaches `offset` (DeleteRecords on a leader
 * with followers: gr_partition_wait_low_watermark). */
int gr_req_wait_committed(struct gr_req *req, struct gr_log *log, int64_t end_offset);
int gr_req_wait_data(struct gr_req *req, struct gr_log *log, enum gr_fetch_isolation iso);
int gr_req_wait_log_start(struct gr_req *req, struct gr_log *log, int64_t ticket);
int gr_req_wait_low_watermark(struct gr_req *req, struct gr_log *log, int64_t offset);
/* Until committed, on a set of partitions (Produce acks=-1): the request's commit set, a state slot made
 * before its appends with room for `max` partitions (returns false when out of arena memory: nothing
 * appended yet, close). gr_req_commits_add notes that `log`'s visible offset must reach `end_offset`
 * before the answer (`ctx`: the caller's, given back to `failed`). gr_req_await_commits declares the wait
 * (gr_req_await) with `timeout_ms` and returns GR_HANDLER_WAIT, or GR_HANDLER_DONE when nothing was noted;
 * the request is finished once every noted partition is committed or failed, as the partition layer judges
 * it (gr_partition_produce_acked): `failed` fills the answer of a partition that went offline
 * (KAFKA_STORAGE_ERROR), whose leader became a follower (NOT_LEADER_OR_FOLLOWER), whose high watermark
 * passed the batch with the maximal ISR below the effective min ISR (NOT_ENOUGH_REPLICAS_AFTER_APPEND), or
 * that the deadline caught short (REQUEST_TIMED_OUT). Checked at once: a set already committed finishes the
 * request inside the call (a request whose connection is gone is freed then). It drops the request's pinned
 * files (the appends are done). */
bool gr_req_commits_new(struct gr_req *req, int max);
void gr_req_commits_add(struct gr_req *req, struct gr_log *log, int64_t end_offset, void *ctx);
enum gr_handler_rc gr_req_await_commits(struct gr_req *req, int64_t timeout_ms,
                                        void (*failed)(struct gr_req *req, void *ctx, int16_t error_code));
/* Until the partitions are appendable (partition/gate.c, per-partition order): enters the request into the
 * append gate with `logs` (n distinct, borrowed until `run` ran) and runs `run` (the appends) once every
 * active file is pinned and open, then drops the pins; `run`'s result is acted on as a handler's (at once:
 * returned; later: gr_req_complete). Returns `run`'s result, GR_HANDLER_WAIT while queued or reopening,
 * or GR_HANDLER_CLOSE when out of memory (nothing appended). Needs the broker's I/O pool. */
enum gr_handler_rc gr_req_await_appendable(struct gr_req *req, struct gr_log **logs, int n,
                                           gr_handler_fn run);
/* Until the local log is made (server/logwait.h; built in request.c), Produce and Fetch in cluster mode.
   gr_req_logs_note notes that the running request needs partition `partition` of topic `topic_id`, which this
   broker leads but whose log is not made (gr_route.pending). Returns true when noted; false when the
   request's log wait already expired (the partition then answers REQUEST_TIMED_OUT) or out of arena memory
   (it answers the route's NOT_LEADER_OR_FOLLOWER). */
bool gr_req_logs_note(struct gr_req *req, const uint8_t topic_id[16], int32_t partition);
/* Whether partitions were noted since the request last ran (gr_req_await_logs is then due). */
bool gr_req_logs_waiting(const struct gr_req *req);
/* Whether the request's log wait reached its deadline (pending partitions answer REQUEST_TIMED_OUT). */
bool gr_req_logs_expired(const struct gr_req *req);
/* Milliseconds of `timeout_ms` left after the request's log wait (all of it when it never waited; >= 0):
   what a later wait of the same request (acks=-1) may still use. */
int64_t gr_req_logs_left_ms(const struct gr_req *req, int64_t timeout_ms);
/* Declares that the running request waits until every noted log is made, for at most `timeout_ms` counted
   from its first log wait (the request's timeout, not restarted by a second round), then runs `run` again
   (its result acted on as a handler's, gr_req_complete); at the deadline `run` runs with
   gr_req_logs_expired true. Returns GR_HANDLER_WAIT. */
enum gr_handler_rc gr_req_await_logs(struct gr_req *req, int64_t timeout_ms, gr_handler_fn run);
/* Until verified by the transaction coordinator on another broker (KIP-890 part 1, server/txns.c
   gr_txns_verify_remote: AddPartitionsToTxnManager's wait): declares that the running request waits for at
   most `timeout_ms`, then runs `run` again (its result acted on as a handler's, gr_req_complete) when
   gr_req_verified is called, or at the deadline after `cancel(req)` withdrew the question (its answer then
   never comes). Returns GR_HANDLER_WAIT. gr_req_verified: the answer is in (call it once, from the loop,
   never inside a handler). While it waits req->before_append is set: a Produce read after it on its
   connection does not run ahead (server/net.c), so a client's pipelined batches reach a partition in the
   order sent. */
enum gr_handler_rc gr_req_await_verified(struct gr_req *req, int64_t timeout_ms, gr_handler_fn run,
                                         void (*cancel)(struct gr_req *req));
void gr_req_verified(struct gr_req *req);
/* A parked request (its recheck set by gr_req_await) also waits for the log of (topic_id, partition) to be
   made, then for data on it (gr_req_wait_data under `iso`); each runs req->recheck. Returns 1 when queued,
   -ENOMEM out of arena memory (the request's deadline still ends it). Fetch's long poll. */
int gr_req_wait_log_data(struct gr_req *req, const uint8_t topic_id[16], int32_t partition,
                         enum gr_fetch_isolation iso);
/* Cancels every log wait of `req` (gr_req_unpark calls it). */
void gr_req_logs_cancel(struct gr_req *req);

/* Re-checks every parked request now (topic deletion). O(parked): not for the append path. */
void gr_broker_wake_parked(struct gr_broker *b);

/* Finishes a request whose response struct is filled: encodes the response and lets the connection send
 * it in order. Safe to call for a request whose connection is gone (it is then freed). */
void gr_req_finish(struct gr_req *req);
/* Finishes a request that gets no response (acks=0). */
void gr_req_finish_silent(struct gr_req *req);
/* Acts on a handler's return code: finish, finish silently, close the connection, or nothing for
 * GR_HANDLER_WAIT. For a handler run outside gr_req_run (from an I/O pool completion). */
void gr_req_complete(struct gr_req *req, enum gr_handler_rc rc);
/* Runs the handler of a decoded request (req->api, body, resp set) through its API row and acts on its
 * result (gr_req_complete): by dispatch, and again for a request that waited before its handler ran
 * (gr_groups_defer, gr_req_topic_barrier). */
void gr_req_run(struct gr_req *req);
/* Closes the connection of `req` (deferred: safe inside a handler); nothing when it is gone. */
void gr_req_close(struct gr_req *req, const char *why);
/* Returns borrowed: the peer of the connection of `req` for log lines, "" when it is gone. */
const char *gr_req_peer(const struct gr_req *req);
/* Per-request state of a module, keyed by an address of its own (e.g. a static const char): gr_req_state
 * returns the state added under `key` (NULL when none); gr_req_state_add adds `bytes` of zeroed state in
 * the request's arena (16-byte aligned; bytes may be 0 for a mark) and returns it, NULL when out of arena
 * memory. Freed with the request. A handler's own state is req->hstate. */
void *gr_req_state(const struct gr_req *req, const void *key);
void *gr_req_state_add(struct gr_req *req, const void *key, size_t bytes);
/* The advertised host and port of the listener `req` came in on (the first listener when its connection
 * is gone): what Metadata, FindCoordinator and DescribeCluster tell this client. Returns borrowed. */
void gr_req_advertised(const struct gr_req *req, const char **host, int32_t *port);
/* Returns borrowed: the name of the listener `req` came in on (the first listener's when its connection is
 * gone): the listener whose endpoints Metadata, FindCoordinator, DescribeCluster and the leader hints of
 * Produce and Fetch name (Kafka answers through the request's listener name). */
const char *gr_req_listener_name(const struct gr_req *req);
/* Takes `slice` into the request, which releases it once the response is sent (gr_req_free): the caller
 * names its range in a records field (gr_records_file). Returns 0, or -ENOMEM (the arena is spent) with
 * the slice still the caller's. */
int gr_req_own_slice(struct gr_req *req, const struct gr_log_slice *slice);
/* Releases every file range the request holds (gr_req_own_slice) and forgets them: a handler that fills its
 * response again (a long poll's next round) starts from none. gr_req_free does it too. */
void gr_req_release_slices(struct gr_req *req);
/* Frees a request and everything it owns. */
void gr_req_free(struct gr_req *req);
/* Takes a parked request out of the parked list (its waits and deadline end) without finishing it: the group
 * binding's defer (groups.c) before it runs the request's handler, and request.c. Not for handlers. */
void gr_req_unpark(struct gr_req *req);

/* The API table (apis.c, from apis.def). gr_api_find returns the row of `api_key` (borrowed, static), NULL
 * when Gregor does not serve it; gr_api_table returns every row in key order and sets *count. */
const struct gr_api *gr_api_find(int16_t api_key);
const struct gr_api *gr_api_table(int *count);
/* Decodes one complete request frame, picks its API row and runs its handler (dispatch.c); a frame that
 * does not decode, or names an API or version not served, closes the connection. */
void gr_dispatch(struct gr_req *req);
/* Whether a request frame (after its size prefix; borrowed) may be dispatched while requests read before it
 * on its connection are still unanswered: true for Produce only, whose read-ahead lets one group-commit
 * fdatasync cover a producer's in-flight batches. Every other request runs once every request before it on
 * the connection is answered and sent, as Kafka handles one request per connection at a time (its channel
 * is muted until the response is sent): an answer that describes state (Metadata above all) must be built
 * when it can be sent, not when it arrived behind a parked request (issue #20's failover stall: a
 * Metadata answer built at a kill -9 was held 8 s behind acks=-1 Produces and sent the dead leader). */
bool gr_dispatch_runs_ahead(const uint8_t *frame, size_t frame_len);

/* Returns borrowed: the partition object of `log` (gr_partition_get on b->parts; broker.c). Out of memory
 * for it (a few dozen bytes per partition, made once) aborts with a log line. */
struct gr_partition *gr_broker_partition(struct gr_broker *b, struct gr_log *log);

/* Fills b->image (made by gr_image_new, and given to the store as its topic hook's context:
 * cluster/local.h) from the open store and the bound listeners (name, advertised host and port): the
 * single-node source. Returns 0 or -errno (see gr_image_local_load). */
int gr_broker_image_load(struct gr_broker *b);

/* Cluster mode (membership.c; only when gregor.metadata.etcd.endpoints is set). gr_membership_resolve makes
 * b->member from the configuration and the bound listeners and settles the cluster id with etcd before the
 * store opens (*cluster_id: borrowed, for gr_store_config.cluster_id); gr_membership_join registers and
 * loads the image (call before gr_net_serve); both return 0 or -1 after logging why (the broker exits).
 * gr_membership_stop revokes the lease (bounded) and frees the member; nothing when there is none.
 * gr_membership_on_topic is the store's topic hook in cluster mode (ctx = the image): it only links or
 * unlinks the image topic of the same id to the storage topic, since topics come from etcd. */
int gr_membership_resolve(struct gr_broker *b, const char *log_dir, const char **cluster_id);
int gr_membership_join(struct gr_broker *b);
/* Cluster mode, after gr_membership_resolve: returns new the etcd topic writer (cluster/topic_writer.h) for
 * b->topic_writer, or NULL (out of memory, no image observer slot). gr_membership_join also starts the
 * replica manager (b->replicas), the ISR writer and the role binding (b->isr_writer, b->roles) and the
 * controller (b->controller, following the member's lease). At stop: gr_membership_stop_controller right
 * after the loop ends (roles and ISR writer freed too: no partition-state write afterwards; nothing when
 * there is none), gr_membership_stop_replicas after the I/O pool is drained and before the store closes,
 * the topic writer freed before gr_membership_stop (it borrows the member's etcd client). */
struct gr_topic_writer *gr_membership_topic_writer(struct gr_broker *b);
void gr_membership_stop_controller(struct gr_broker *b);
void gr_membership_stop_replicas(struct gr_broker *b);
void gr_membership_stop(struct gr_broker *b);
void gr_membership_on_topic(void *ctx, struct gr_topic *t, bool deleted);
/* SIGTERM in cluster mode with controlled.shutdown.enable (Kafka: BrokerServer.shutdown's controlled
 * shutdown): marks the registration shutting_down (gr_member_mark) and keeps the loop serving until the
 * image shows this broker leading no partition another live ISR member can take
 * (gr_controller_movable_leaderships), at most GR_CONTROLLED_SHUTDOWN_WAIT_MS, logging what it waits for;
 * then it breaks the loop (main.c's stop path follows: fetchers, flush, lease revoked). Returns true when
 * the wait started (the loop keeps running), false when there is nothing to wait for (not cluster mode,
 * disabled, not registered, or nothing movable led here): the caller breaks the loop itself. */
bool gr_membership_shutdown_begin(struct gr_broker *b);

/* Network (net.c). */
/* Sets up the connection bounds and watchers from the config and the request sink (b->req_sink); call
 * once before gr_net_bind. */
void gr_net_init(struct gr_broker *b);
/* Parses `listeners` and binds each (a busy port or bad address fails here, before the data is touched),
 * without listening: a connect is refused until gr_net_serve. Returns 0 or -1 after logging why. */
int gr_net_bind(struct gr_broker *b);
/* After gr_net_bind: builds the TLS context of every listener whose security protocol is SSL from its
 * ssl.* settings (server/tls.h; issue #23). Returns 0, or -1 after logging the reason naming the key (a
 * refused configuration: the broker exits with status 2 before it serves). */
int gr_net_tls_setup(struct gr_broker *b);
/* Listens on the bound listeners, starts accepting and writes gregor.listener.file: call once the store is
 * open. Returns 0 or -1 after logging why. */
int gr_net_serve(struct gr_broker *b);
/* Allocates a new connection's state and its read buffer (bytes; returns NULL when out of memory, and the
 * accepted connection is then closed at once and logged, rate-limited). malloc; a test seam
 * (server/tests/test_net_accept.c makes it fail), read once per accepted connection. */
extern void *(*gr_net_conn_alloc)(size_t bytes);
/* Once a second: ends an out-of-descriptors episode (logging its counts) and gives freed heap memory back
 * to the system after large releases (malloc_trim). */
void gr_net_housekeeping(struct gr_broker *b, int64_t now_mono_ms);
void gr_net_close_all(struct gr_broker *b);
void gr_net_close_idle(struct gr_broker *b, int64_t now_mono_ms);
/* Closes a connection (deferred free: safe from inside a handler). */
void gr_conn_close(struct gr_conn *conn, const char *why);
bool gr_conn_is_closing(const struct gr_conn *conn);
const char *gr_conn_peer(const struct gr_conn *conn);
/* The connection's peer address without the port ("127.0.0.1", "::1"): what an ACL's host is matched
 * against (Kafka's RequestContext.clientAddress). */
const char *gr_conn_host(const struct gr_conn *conn);

/* Kafka's principal of an unauthenticated connection (KafkaPrincipal.ANONYMOUS), and the longest principal
 * kept (bytes, without the NUL; a longer name is refused by gr_conn_set_principal). */
#define GR_PRINCIPAL_ANONYMOUS "User:ANONYMOUS"
#define GR_PRINCIPAL_MAX 1024
/* The connection's principal as "<type>:<name>" (Kafka's KafkaPrincipal.toString): set by SASL or by the
 * SSL principal mapping (issue #23), GR_PRINCIPAL_ANONYMOUS until then. Valid until the next set or the
 * connection's free. */
const char *gr_conn_principal(const struct gr_conn *conn);
/* Sets the connection's principal to a copy of `principal` ("User:alice"). Returns 0, or -1 when it is
 * empty, longer than GR_PRINCIPAL_MAX or memory ran out (the old principal is then kept). */
int gr_conn_set_principal(struct gr_conn *conn, const char *principal);
/* The request's principal and client host (gr_conn_principal, gr_conn_host); GR_PRINCIPAL_ANONYMOUS and ""
 * once its connection is gone. What the authorizer checks (issue #23). */
const char *gr_req_principal(const struct gr_req *req);
/* The SASL session of the connection of `req` (server/sasl.h), NULL on a listener without SASL or once the
 * connection is gone: what the SaslHandshake and SaslAuthenticate handlers drive. */
struct gr_sasl *gr_req_sasl(const struct gr_req *req);
const char *gr_req_host(const struct gr_req *req);

#endif
