/*
 * remote_summary.h: the group coordinator's side of the batched inter-broker partition summary (issue #22,
 * "In a cluster"). For the committed offsets of partitions another broker leads (the metadata image's
 * leader), it sends that leader one PartitionSummary request (protocol/schema/partition_summary.schema, a
 * Gregor-internal API) naming every such partition with its distinct committed offsets, at most once per
 * `interval_ms` per leader, each answered within `timeout_ms`, and keeps the answers in a
 * struct gr_part_summaries (cluster/part_summary.h) that the metrics families read.
 *
 * A refresh (gr_remote_summary_refresh) groups what it is given by leader. A leader asked less than
 * interval_ms ago, or with a request still pending, is not asked again (its entries stay, or its answer is
 * awaited). Otherwise one request goes to it on this module's own inter-broker connection (purpose
 * GR_BROKER_CLIENT_SUMMARY, cluster/broker_client.h), connecting first when needed: the request waits for the
 * connection at most timeout_ms in all. The answer replaces everything that leader answered before
 * (gr_part_summaries_replace_leader); a partition it answers with an error, or does not answer, is left out
 * and counted; a leader that does not answer in time (timeout, disconnect, bad answer, no connection) has its
 * entries dropped (gr_part_summaries_drop_leader) and every partition asked of it counted
 * (gr_remote_summary_errors: gregor_metrics_remote_partition_errors_total). Waiters
 * (gr_remote_summary_wait) hear when no leader is pending any more: at most timeout_ms after the last
 * refresh that asked.
 *
 * Bounds: at most GR_PART_SUMMARY_PARTITIONS_MAX partitions per request (the rest of a refresh waits for the
 * next one) and GR_PART_SUMMARY_OFFSETS_MAX distinct committed offsets per partition (the largest ones beyond
 * are not asked: those commits are left out); an answer frame of at most `response_bytes_max` bytes
 * (broker_client's cap: a larger one closes the connection), and only partitions that were asked are read
 * from it, each with at most GR_PART_SUMMARY_OFFSETS_MAX offsets. Network thread only.
 * Read next: cluster/part_summary.h, server/metrics_remote.c (who refreshes and reads it).
 */
#ifndef GR_CLUSTER_REMOTE_SUMMARY_H
#define GR_CLUSTER_REMOTE_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/part_summary.h"

struct ev_loop;
struct gr_image;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX */
struct gr_oauth_login;

/* A PartitionSummary answer frame's cap when the config leaves it 0 (bytes). A partition costs about 60
 * bytes and a committed offset about 40: 16 MiB holds 100,000 partitions with several offsets each. */
#define GR_REMOTE_SUMMARY_RESPONSE_BYTES_DEFAULT (16 * 1024 * 1024)
/* Scrapes that may wait on one refresh at once (the admin listener serves at most 16 connections). */
#define GR_REMOTE_SUMMARY_WAITERS_MAX 32

struct gr_remote_summary_config {
    int32_t node_id;            /* this broker: partitions it leads are never asked */
    const char *listener_name;  /* the listener of the peers to connect to (inter.broker.listener.name) */
    int64_t interval_ms;        /* a leader is asked at most once per interval (issue #22: 1000) */
    int64_t timeout_ms;         /* a leader's answer is awaited at most this long (issue #22: 500) */
    int64_t response_bytes_max; /* 0: GR_REMOTE_SUMMARY_RESPONSE_BYTES_DEFAULT */
    struct ssl_ctx_st
        *tls_ctx;         /* an SSL inter-broker listener's client context (borrowed), NULL: PLAINTEXT */
    bool tls_verify_host; /* broker_client.h: the certificate must name the peer's host */
    /* broker_client.h: a SASL inter-broker listener's mechanism and this broker's credentials (borrowed
       during gr_remote_summary_new, copied); NULL mechanism: no SASL */
    const char *sasl_mechanism, *sasl_username, *sasl_password;
    const struct gr_oauth_login *sasl_oauth_login; /* broker_client.h: OAUTHBEARER's token maker (borrowed) */
};

/* One committed offset of a partition the caller wants figures for (several groups: several entries). */
struct gr_remote_want {
    const char *topic; /* borrowed for the call */
    int32_t partition;
    int64_t committed; /* >= 0 */
};

/* The log start offset of (topic, partition) as its leader reported it rose from `old_start` to `new_start`
   between two answers: records_lost counting (server/metrics_status.h) for partitions led elsewhere. */
typedef void gr_remote_summary_start_cb(void *ctx, const char *topic, int32_t partition, int64_t old_start,
                                        int64_t new_start);

struct gr_remote_summary;

/* Makes the coordinator's summary client on `loop`, reading leaders and addresses from `img` (both borrowed,
   outliving it). `start_cb` (may be NULL) hears log start rises with `ctx`. Returns new, or NULL with a
   reason in err (err_len bytes): a bad config (interval or timeout < 1, response_bytes_max < 0, listener
   name as cluster/broker_client.h takes it) or out of memory. */
struct gr_remote_summary *gr_remote_summary_new(struct ev_loop *loop, struct gr_image *img,
                                                const struct gr_remote_summary_config *cfg,
                                                gr_remote_summary_start_cb *start_cb, void *ctx, char *err,
                                                size_t err_len);
/* Closes its connections and frees it and its cache; waiters are not called. NULL is ignored. */
void gr_remote_summary_free(struct gr_remote_summary *rs);
/* Certificate reload: its connections opened from now on use client context `ctx` (borrowed);
   cluster/broker_client.h gr_broker_client_set_tls_ctx, whose return it returns. */
int gr_remote_summary_set_tls_ctx(struct gr_remote_summary *rs, struct ssl_ctx_st *ctx);

/* A refresh at `now_ms` (monotonic) for wants[0..n) (the partitions this broker leads are skipped; the array
   is sorted in place): see the file comment. Returns the number of leaders now pending (asked and not yet
   answered or failed), 0 when none (nothing to wait for). */
int gr_remote_summary_refresh(struct gr_remote_summary *rs, struct gr_remote_want *wants, int32_t n,
                              int64_t now_ms);
/* Leaders pending now. */
int gr_remote_summary_pending(const struct gr_remote_summary *rs);
/* Calls cb(ctx) once no leader is pending (from the loop, never inside this call, at most timeout_ms after
   the last refresh that asked). Returns 0; -EALREADY when nothing is pending (cb will not run), -ENOSPC when
   GR_REMOTE_SUMMARY_WAITERS_MAX wait already (cb will not run). */
int gr_remote_summary_wait(struct gr_remote_summary *rs, void (*cb)(void *ctx), void *ctx);
/* Removes every waiter with `ctx` (its owner is going away): their callbacks will not run. */
void gr_remote_summary_unwait(struct gr_remote_summary *rs, void *ctx);

/* Returns borrowed: the latest answers (cluster/part_summary.h), valid until the next refresh's answer. */
const struct gr_part_summaries *gr_remote_summary_cache(const struct gr_remote_summary *rs);
/* Partitions left out since start: asked of a leader that did not answer in time, or answered with an error
   (gregor_metrics_remote_partition_errors_total). */
uint64_t gr_remote_summary_errors(const struct gr_remote_summary *rs);

#endif
