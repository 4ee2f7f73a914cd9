/*
 * etcd.h: an asynchronous etcd v3 client on the broker's libev loop. It speaks etcd's JSON gateway
 * (grpc-gateway, HTTP/1.1 POST to /v3/kv/range, /v3/kv/put, /v3/kv/deleterange, /v3/kv/txn,
 * /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke and the streaming /v3/watch; served by etcd 3.4
 * to 3.6) through libcurl's multi interface, whose sockets and timer are ev_io / ev_timer watchers on the
 * caller's loop, and parses with jansson. Keys and values are bytes (base64 on the wire, decoded here);
 * int64 fields arrive as JSON strings or numbers and may be absent when zero (proto3 JSON), all accepted.
 *
 * Contract (every function, every callback: the loop thread only; nothing here blocks it):
 * - A call either fails at once (returns NULL; gr_etcd_last_error says why: a local refusal such as a txn
 *   of more than GR_ETCD_TXN_OPS_MAX operations or a body over GR_ETCD_REQUEST_BYTES_MAX) or returns a
 *   handle whose callback then runs exactly once, later, from the loop (never inside the call). A handle
 *   cancelled with gr_etcd_cancel never calls back; a handle is invalid once its callback has started.
 * - Every request has a timeout (gr_etcd_config.request_timeout_ms from the call) after which it completes
 *   with GR_ETCD_TIMEOUT. Within it, a failure to connect tries the next endpoint, and after a round of
 *   all endpoints failing, waits an exponential back-off (backoff_min_ms doubling to backoff_max_ms, reset
 *   by any success) before the next round. Only connection failures are retried (the request was not sent);
 *   a connection lost after sending is GR_ETCD_UNREACHABLE with an unknown outcome: the caller's compares
 *   (txn) are what make a retry safe.
 * - A response over response_bytes_max fails its request with GR_ETCD_TOO_LARGE; nothing beyond the cap is
 *   buffered. Every count and length in a response is bounded by the bytes received.
 * - Results passed to a callback are borrowed for the callback's duration only (copy what you keep).
 * - Host names are resolved by libcurl; with Debian's libcurl (threaded resolver) that does not block, but
 *   tests and examples use numeric addresses.
 *
 * Watches (gr_etcd_watch_start) deliver PUT/DELETE events in revision order, each revision once. After a
 * lost connection the stream is reopened (next endpoint, back-off) at the first revision not yet
 * delivered; events below it are dropped, so nothing is applied twice. When etcd cancels the watch because
 * that revision was compacted, the client re-reads the watched range page by page at one revision R and
 * hands the owner a snapshot (SNAPSHOT_BEGIN: forget the range; SNAPSHOT_KV for every key; SNAPSHOT_END at
 * R) and resumes the watch at R + 1: a cache kept from events then equals a fresh range. Liveness of the
 * stream: the connection has TCP keepalive (idle GR_ETCD_TCP_KEEPIDLE_S, probes every
 * GR_ETCD_TCP_KEEPINTVL_S), so a dead peer or a cut path ends the stream and it is reopened; a paused etcd
 * (SIGSTOP) keeps its TCP connection, and the stream simply resumes when it does. Watches ask for
 * progress_notify, whose revisions advance the resume point.
 *
 * Read next: cluster/etcd.c (the curl/libev binding, the JSON codec, the watch), cluster/tests/test_etcd.c
 * (every rule above against a real etcd), etcd's api/etcdserverpb/rpc.proto for the field names.
 */
#ifndef GR_ETCD_H
#define GR_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

struct ev_loop;

/* etcd's --max-txn-ops default: a txn with more operations (success + failure, compares apart) is refused
 * by etcd, so refused here first. */
#define GR_ETCD_TXN_OPS_MAX 128
/* etcd's --max-request-bytes default (1.5 MiB): the size of the request as etcd sees it (protobuf). The
 * client estimates it as raw key, value and range_end bytes plus GR_ETCD_FIELD_OVERHEAD_BYTES per compare
 * or operation and refuses more locally. */
#define GR_ETCD_REQUEST_BYTES_MAX (1536 * 1024)
#define GR_ETCD_FIELD_OVERHEAD_BYTES 32
/* Default cap on one response (or one watch message), bytes: a range of 1,000 topic records fits many times.
 */
#define GR_ETCD_RESPONSE_BYTES_DEFAULT (4 * 1024 * 1024)
/* Defaults of gr_etcd_config (milliseconds). */
#define GR_ETCD_REQUEST_TIMEOUT_MS_DEFAULT 5000
#define GR_ETCD_CONNECT_TIMEOUT_MS_DEFAULT 1000
#define GR_ETCD_BACKOFF_MIN_MS_DEFAULT 50
#define GR_ETCD_BACKOFF_MAX_MS_DEFAULT 2000
/* Endpoints accepted in one list, and the length of one ("http://host:port"): GR_ETCD_ENDPOINTS_MAX and
 * GR_ETCD_ENDPOINT_BYTES_MAX of common/limits.h, the same bounds the configuration checks. */
/* Keys per page of gr_etcd_range_paged when the caller passes 0. */
#define GR_ETCD_PAGE_KEYS_DEFAULT 500
/* TCP keepalive of every connection (seconds, probes): a watch on a dead path ends within idle + 3 probes
 * (11 s) and is reopened. */
#define GR_ETCD_TCP_KEEPIDLE_S 5
#define GR_ETCD_TCP_KEEPINTVL_S 2
#define GR_ETCD_TCP_KEEPCNT 3

struct gr_etcd_config {
    const char *endpoints;      /* "http://h:p[,http://h:p...]", borrowed during gr_etcd_new */
    int64_t request_timeout_ms; /* every request's timeout (0: default) */
    int64_t connect_timeout_ms; /* one connection attempt (0: default) */
    int64_t backoff_min_ms;     /* first wait after all endpoints failed (0: default) */
    int64_t backoff_max_ms;     /* ceiling of the doubling wait (0: default) */
    size_t response_bytes_max;  /* cap on one response or watch message (0: default) */
};

/* How a request ended. */
enum gr_etcd_status {
    GR_ETCD_OK = 0,
    GR_ETCD_TIMEOUT,      /* the request's timeout passed (including a paused or silent etcd) */
    GR_ETCD_UNREACHABLE,  /* the connection failed after the request was sent: outcome unknown */
    GR_ETCD_TOO_LARGE,    /* the response exceeded response_bytes_max */
    GR_ETCD_SERVER_ERROR, /* etcd answered {"error","code"}: grpc_code and message say what */
    GR_ETCD_BAD_RESPONSE, /* not the JSON expected, or a field out of bounds */
    GR_ETCD_LEASE_GONE,   /* keepalive: the lease is not found or its TTL is <= 0 */
};

/* gRPC codes etcd uses that callers test (google.golang.org/grpc/codes). */
#define GR_ETCD_GRPC_INVALID_ARGUMENT 3
#define GR_ETCD_GRPC_NOT_FOUND 5
#define GR_ETCD_GRPC_OUT_OF_RANGE 11 /* "required revision has been compacted" / "is a future revision" */

/* One key-value, as mvccpb.KeyValue. key and value are NUL-terminated copies (the NUL not counted). */
struct gr_etcd_kv {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
    int64_t create_revision; /* revision of the key's creation (0: absent, in a compare) */
    int64_t mod_revision;    /* revision of its last change */
    int64_t version;         /* changes since creation (a delete resets it) */
    int64_t lease;           /* lease id it is attached to, 0 none */
};

enum gr_etcd_op_type { GR_ETCD_OP_RANGE, GR_ETCD_OP_PUT, GR_ETCD_OP_DELETE };

/* One operation: a range, a put or a delete range (RequestOp). Borrowed by the call that takes it. */
struct gr_etcd_op {
    enum gr_etcd_op_type type;
    const char *key;
    size_t key_len;        /* 0: strlen(key) */
    const char *range_end; /* NULL: the key alone; gr_etcd_prefix_end makes a prefix's end */
    size_t range_end_len;  /* 0: strlen(range_end); "\0" (every key >= key) needs 1 */
    const char *value;     /* PUT: the value (NULL = empty) */
    size_t value_len;
    int64_t lease;    /* PUT: attach to this lease (0 none) */
    bool prev_kv;     /* PUT / DELETE: return the previous key-values */
    int64_t limit;    /* RANGE: at most this many keys (0 no limit) */
    int64_t revision; /* RANGE: read at this revision (0 latest) */
    bool keys_only;   /* RANGE: keys without values */
    bool count_only;  /* RANGE: only the count */
};

enum gr_etcd_target { GR_ETCD_VERSION, GR_ETCD_CREATE, GR_ETCD_MOD, GR_ETCD_VALUE, GR_ETCD_LEASE };
enum gr_etcd_cmp { GR_ETCD_EQUAL, GR_ETCD_GREATER, GR_ETCD_LESS, GR_ETCD_NOT_EQUAL };

/* One compare of a txn (etcdserverpb.Compare): key's target <cmp> number (or value). A key that does not
 * exist has create_revision, mod_revision and version 0 (so CREATE EQUAL 0 = "absent"). */
struct gr_etcd_compare {
    const char *key;
    size_t key_len; /* 0: strlen(key) */
    enum gr_etcd_target target;
    enum gr_etcd_cmp cmp;
    int64_t number;    /* VERSION, CREATE, MOD, LEASE */
    const char *value; /* VALUE */
    size_t value_len;
};

struct gr_etcd_txn {
    const struct gr_etcd_compare *compares;
    size_t compare_count;
    const struct gr_etcd_op *success;
    size_t success_count;
    const struct gr_etcd_op *failure;
    size_t failure_count;
};

/* One operation's response (a range's kvs, a put's or delete's prev_kvs) inside a result. */
struct gr_etcd_op_result {
    enum gr_etcd_op_type type;
    int64_t revision;       /* header.revision */
    struct gr_etcd_kv *kvs; /* RANGE: the keys; PUT/DELETE: prev_kvs when asked */
    size_t kv_count;
    int64_t count; /* RANGE: keys in the range; DELETE: keys deleted */
    bool more;     /* RANGE: more keys beyond the limit */
};

/* What a callback gets. status first; the rest is meaningful for GR_ETCD_OK only (and grpc_code, message
 * for GR_ETCD_SERVER_ERROR, message for every error). */
struct gr_etcd_result {
    enum gr_etcd_status status;
    int grpc_code;                       /* GR_ETCD_SERVER_ERROR: the gRPC code etcd gave */
    const char *message;                 /* every error: a one-line reason ("" when OK) */
    int64_t revision;                    /* header.revision: the store's revision when answered */
    struct gr_etcd_op_result op;         /* range, put, delete: the response */
    bool succeeded;                      /* txn: the compares held (success ops ran) */
    struct gr_etcd_op_result *responses; /* txn: one per op of the branch taken, in order */
    size_t response_count;
    int64_t lease_id; /* lease grant / keepalive: the lease */
    int64_t ttl_s;    /* lease grant / keepalive: its TTL, seconds */
};

struct gr_etcd;
struct gr_etcd_req;
struct gr_etcd_watch;

typedef void gr_etcd_cb(void *ctx, const struct gr_etcd_result *res);

/* Makes a client on `loop` (borrowed; it must outlive the client). Returns new, or NULL with a reason in
 * err (at most err_len bytes) when the endpoint list is empty, malformed (not http://host:port), longer
 * than GR_ETCD_ENDPOINTS_MAX, or libcurl fails to initialise. No connection is made until a request. */
struct gr_etcd *gr_etcd_new(struct ev_loop *loop, const struct gr_etcd_config *cfg, char *err,
                            size_t err_len);
/* Cancels every request and watch (no callback runs) and frees the client. Never from inside a callback. */
void gr_etcd_free(struct gr_etcd *etcd);
/* The reason the last call on `etcd` returned NULL (returns borrowed, valid until the next call). */
const char *gr_etcd_last_error(const struct gr_etcd *etcd);
/* Writes the end of the prefix `prefix` (etcd's "range_end = prefix with its last byte + 1", clientv3's
 * GetPrefixRangeEnd) into out (at least len bytes) and returns its length; an all-0xff prefix gives "\0"
 * (every key >= prefix), length 1. */
size_t gr_etcd_prefix_end(const char *prefix, size_t len, char *out);

/* Range (/v3/kv/range): op->type must be GR_ETCD_OP_RANGE. Result in res->op. */
struct gr_etcd_req *gr_etcd_range(struct gr_etcd *etcd, const struct gr_etcd_op *op, gr_etcd_cb *cb,
                                  void *ctx);
/* Put (/v3/kv/put): op->type GR_ETCD_OP_PUT; res->op.kvs holds the previous value when op->prev_kv. */
struct gr_etcd_req *gr_etcd_put(struct gr_etcd *etcd, const struct gr_etcd_op *op, gr_etcd_cb *cb, void *ctx);
/* Delete range (/v3/kv/deleterange): op->type GR_ETCD_OP_DELETE; res->op.count = keys deleted. */
struct gr_etcd_req *gr_etcd_delete(struct gr_etcd *etcd, const struct gr_etcd_op *op, gr_etcd_cb *cb,
                                   void *ctx);
/* Txn (/v3/kv/txn): refused at once with more than GR_ETCD_TXN_OPS_MAX operations in success + failure,
 * or an estimated size over GR_ETCD_REQUEST_BYTES_MAX. res->succeeded says which branch ran and
 * res->responses carries each of its operations' results. */
struct gr_etcd_req *gr_etcd_txn(struct gr_etcd *etcd, const struct gr_etcd_txn *txn, gr_etcd_cb *cb,
                                void *ctx);
/* Lease grant (/v3/lease/grant): ttl_s seconds (>= 1), id 0 lets etcd choose. res->lease_id, res->ttl_s. */
struct gr_etcd_req *gr_etcd_lease_grant(struct gr_etcd *etcd, int64_t ttl_s, int64_t id, gr_etcd_cb *cb,
                                        void *ctx);
/* One keepalive (/v3/lease/keepalive with one request; one response): res->ttl_s is the renewed TTL.
 * A lease that no longer exists (etcd answers TTL 0, or "lease not found") completes with
 * GR_ETCD_LEASE_GONE: evidence, unlike a timeout. */
struct gr_etcd_req *gr_etcd_lease_keepalive(struct gr_etcd *etcd, int64_t id, gr_etcd_cb *cb, void *ctx);
/* Revoke (/v3/lease/revoke): deletes the lease and every key attached. An unknown lease is
 * GR_ETCD_SERVER_ERROR with grpc_code GR_ETCD_GRPC_NOT_FOUND. */
struct gr_etcd_req *gr_etcd_lease_revoke(struct gr_etcd *etcd, int64_t id, gr_etcd_cb *cb, void *ctx);

/* Called once per page of gr_etcd_range_paged with its keys (borrowed), all read at `revision`. */
typedef void gr_etcd_page_cb(void *ctx, const struct gr_etcd_kv *kvs, size_t kv_count, int64_t revision);
/* Reads every key in [key, range_end) page by page (page_keys per page, 0: GR_ETCD_PAGE_KEYS_DEFAULT), all
 * pages at the revision of the first, in key order: page_cb for each page, then done exactly once (its
 * res->revision is that revision; an error ends the read, pages already given stay given). Each page has
 * the request timeout. A page over the response cap is asked again with half as many keys, down to one:
 * only a single key-value over the cap fails the read (GR_ETCD_TOO_LARGE). ctx goes to both callbacks. Cancel
 * with gr_etcd_cancel (then neither callback runs again). */
struct gr_etcd_req *gr_etcd_range_paged(struct gr_etcd *etcd, const char *key, size_t key_len,
                                        const char *range_end, size_t range_end_len, int64_t page_keys,
                                        gr_etcd_page_cb *page_cb, gr_etcd_cb *done, void *ctx);
/* Cancels a pending request: its callbacks never run; the handle is freed. Not for a handle whose
 * callback has started (it is freed when the callback returns). */
void gr_etcd_cancel(struct gr_etcd_req *req);

enum gr_etcd_watch_kind {
    GR_ETCD_EVENT_PUT,            /* kv is the new value; prev_kv when asked and known */
    GR_ETCD_EVENT_DELETE,         /* kv.key and kv.mod_revision (the deletion's revision) */
    GR_ETCD_EVENT_SNAPSHOT_BEGIN, /* resync: forget every key of the watched range */
    GR_ETCD_EVENT_SNAPSHOT_KV,    /* resync: this key exists with this value */
    GR_ETCD_EVENT_SNAPSHOT_END,   /* resync done: the range is as at `revision`; events follow from + 1 */
};

struct gr_etcd_watch_event {
    enum gr_etcd_watch_kind kind;
    const struct gr_etcd_kv *kv;      /* PUT, DELETE, SNAPSHOT_KV (borrowed) */
    const struct gr_etcd_kv *prev_kv; /* PUT, DELETE with prev_kv asked: the previous value, or NULL */
    int64_t revision;                 /* the event's mod_revision; SNAPSHOT_END: the snapshot's revision */
};

typedef void gr_etcd_watch_cb(void *ctx, const struct gr_etcd_watch_event *ev);

/* Watches [key, range_end) (range_end NULL: the key alone) from start_revision (0: from now) and calls cb
 * for every event, in revision order, for as long as it runs: reconnects and resyncs as the file comment
 * says, never gives up. Returns new, or NULL at once for a bad argument. prev_kv asks etcd for previous
 * values. cb may stop this watch (or start others) from inside. */
struct gr_etcd_watch *gr_etcd_watch_start(struct gr_etcd *etcd, const char *key, size_t key_len,
                                          const char *range_end, size_t range_end_len, int64_t start_revision,
                                          bool prev_kv, gr_etcd_watch_cb *cb, void *ctx);
/* The first revision the watch has not delivered (its resume point), 0 while unknown (started from now
 * and not yet created). */
int64_t gr_etcd_watch_next_revision(const struct gr_etcd_watch *watch);
/* Times the watch resynced from a snapshot (tests and logs). */
uint64_t gr_etcd_watch_resyncs(const struct gr_etcd_watch *watch);
/* Times the watch stream was (re)opened and etcd confirmed it (tests and logs). */
uint64_t gr_etcd_watch_connects(const struct gr_etcd_watch *watch);
/* Stops and frees the watch: cb never runs again (also when called from inside cb). */
void gr_etcd_watch_stop(struct gr_etcd_watch *watch);

#endif
