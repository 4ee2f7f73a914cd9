/*
 * replicas.h: the replica manager, which makes this broker's local partition logs follow the metadata
 * image (cluster mode, issue 19). It is an image observer (cluster/image.h gr_image_observe): once started
 * (the member calls gr_replicas_start after the first snapshot is in the image), each pass compares the
 * image with the store (storage/store.h) and submits storage topic operations to the I/O pool:
 *   - a store topic whose id is unknown to the image (deleted, or deleted and re-created under a new id
 *     while this broker was down) is deleted with all its directories (Kafka's stray-log rule);
 *   - a held partition whose replica set no longer contains this node is deleted (stray); a partition with
 *     no replicas in the image (its state not written yet) is left as it is, never taken for a stray;
 *   - an image topic with a partition whose replica set contains this node gets a sparse store topic (the
 *     image's id and partition count; grown when the image grows) and the local log of that partition
 *     (directory "<topic>-<p>" with partition.metadata naming the topic id);
 *   - every image topic is linked to its store topic (gr_image_topic.local: the store topic of the same name
 *     and id, else NULL), so that routing (server/route.h) finds the local logs.
 * Invariants: nothing happens before gr_replicas_start; at most GR_REPLICA_OPS_PER_PASS_MAX operations per
 * pass, and no pass starts while operations of the previous one are in flight, so one partition never has
 * two operations at once; the rest continues on the next loop iteration; a failed operation is logged (rate
 * limited) and retried after a back-off (GR_REPLICA_RETRY_MS_MIN doubling to _MAX); never a crash. File work
 * only on the pool (storage's gr_topic_op_* run step): the network thread does none.
 * Network thread only. Read next: storage/store.h (sparse topics), server/route.c.
 */
#ifndef GR_CLUSTER_REPLICAS_H
#define GR_CLUSTER_REPLICAS_H

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct gr_coordinator;
struct gr_image;
struct gr_iopool;
struct gr_log;
struct gr_store;
struct gr_topic;

struct gr_replicas_config {
    struct gr_store *store;   /* borrowed; outlives the manager */
    struct gr_iopool *pool;   /* the I/O pool running the file work (NULL: inline, tests only) */
    struct ev_loop *loop;     /* runs the continuation and back-off timer */
    int32_t ops_per_pass_max; /* 0: GR_REPLICA_OPS_PER_PASS_MAX */
    /* Called on the network thread when a local log was made (made true) or deleted (made false, the log
       still allocated, offline: storage/store.h), so the server sets up or drops the partition's state
       (server/broker.h gr_broker_partition). May be NULL. */
    void (*on_log)(void *ctx, struct gr_topic *t, int32_t partition, struct gr_log *log, bool made);
    void *ctx;
    /* The group coordinator (may be NULL): when a topic leaves the image (deleted, or its name re-created
       under a new id) the groups it holds drop their committed offsets of it (coordinator/coordinator.h
       gr_coord_topic_deleted, as Kafka's GroupCoordinatorService.onPartitionsDeleted), whichever broker
       received the DeleteTopics. Compared batch by batch from start on. */
    struct gr_coordinator *coord;
};

/* Counters for tests and logs. */
struct gr_replicas_stats {
    int64_t passes;          /* passes run (each at most ops_per_pass_max operations) */
    int64_t made, deleted;   /* partition logs made and deleted */
    int64_t topics_created;  /* sparse store topics created */
    int64_t topics_deleted;  /* store topics deleted (id unknown to the image) */
    int64_t failures;        /* operations that failed (each retried after a back-off) */
    int64_t topics_gone;     /* topics seen leaving the image (their offsets dropped when coord is set) */
    int32_t max_ops_in_pass; /* largest number of operations one pass submitted */
    int32_t in_flight;       /* operations submitted and not completed */
    bool idle;               /* started, nothing in flight, nothing scheduled, the last pass found no work */
};

/* Returns new: a manager for `img` (borrowed; outlives it) with `cfg` (copied), not started, or NULL when out
   of memory or a required field (store, loop) is missing. */
struct gr_replicas *gr_replicas_new(const struct gr_replicas_config *cfg, struct gr_image *img);
/* The image is fully loaded: observes it (gr_image_observe) and runs the first pass, which also removes what
   the broker kept of topics deleted while it was down. Returns 0, -ENOSPC (too many observers) or -EALREADY.
 */
int gr_replicas_start(struct gr_replicas *r);
/* Stops observing and frees. The I/O pool must have been drained first (as before gr_store_close), so no
   operation of the manager is in flight. NULL is ignored. */
void gr_replicas_free(struct gr_replicas *r);
/* Fills `st` (see struct gr_replicas_stats). */
void gr_replicas_stats(const struct gr_replicas *r, struct gr_replicas_stats *st);

#endif
