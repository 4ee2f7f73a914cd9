/*
 * groups.h: the group coordinator's server binding (server/groups.c): starting and stopping b->coord over
 * __consumer_offsets, its lazy creation on first group use, the coordinator's timers and hooks. Dispatch
 * calls gr_groups_defer for the APIs marked needs_groups in server/apis.def; handlers only use b->coord (and
 * FindCoordinator gr_groups_coordinator). In cluster mode (gr_groups_cluster_start) b->coord holds only the
 * groups of the __consumer_offsets partitions this broker leads, loaded and unloaded as the image changes.
 * Read next: server/groups.c, coordinator/coordinator.h.
 */
#ifndef GR_GROUPS_H
#define GR_GROUPS_H

#include <stdbool.h>

#include "server/broker.h"

struct gr_offsets_log;

/* gr_groups_start opens (creating when missing) __consumer_offsets, replays it into a new b->coord and
 * starts its timers on b->loop; returns 0 or -errno. gr_groups_stop stops the timers and frees b->coord
 * without answering parked JoinGroup / SyncGroup requests (call it before freeing parked requests and before
 * closing the store). */
int gr_groups_start(struct gr_broker *b);
/* Lazy start, as Kafka creates __consumer_offsets on first group use: at broker start the coordinator is
 * started only when __consumer_offsets already exists (its replay takes milliseconds); on a new data
 * directory the first group request (any API marked needs_groups in server/apis.def) or a Metadata /
 * CreateTopics naming __consumer_offsets goes through gr_groups_defer, which has the topic
 * (offsets.topic.num.partitions partitions, compacted) created on the I/O pool and then calls this. Called
 * with the topic missing (no I/O pool, tests) it creates the topic synchronously on the calling thread.
 * Returns 0 when b->coord exists afterwards, else -errno (logged, retried by the next group request;
 * handlers then answer COORDINATOR_NOT_AVAILABLE as they do for a missing b->coord). */
int gr_groups_ensure(struct gr_broker *b);
void gr_groups_stop(struct gr_broker *b);
/* Lazy coordinator start without blocking the network thread: for a request that needs the coordinator
 * (or names __consumer_offsets) while b->coord is NULL. When __consumer_offsets exists it starts the
 * coordinator now (gr_groups_ensure) and returns false; else it parks `req`, submits the topic's creation
 * to the I/O pool (once for all waiting requests) and returns true: when the creation completed the
 * coordinator is started and every waiting request's handler runs (gr_req_run), or the request is
 * freed when its connection closed meanwhile. Returns false (go on now: handlers answer
 * COORDINATOR_NOT_AVAILABLE without b->coord) when b->coord exists, when `req` already waited once, or out
 * of memory. */
bool gr_groups_defer(struct gr_req *req);
/* Cluster mode (server/membership.c, after the first snapshot is in the image and before the replica manager
 * starts, which is given b->coord): makes b->coord owning no partition (coordinator.h partitions_owned
 * false), mapping groups over the image's __consumer_offsets partition count (offsets.topic.num.partitions
 * while the topic does not exist), observes the image and loads the partitions already led here. Returns 0,
 * -ENOMEM or -ENOSPC (no image observer slot). */
int gr_groups_cluster_start(struct gr_broker *b);
/* Cluster mode: runs the image observer's decision now (load the partitions led here whose local log
 * exists, unload those no longer led here); for the replica manager's "a local log was made", which is not
 * an image change. Nothing in single-node mode. */
void gr_groups_follow(struct gr_broker *b);
/* FindCoordinator for group `group_id` (key type 0), from the metadata image: the leader of partition
 * abs(hashCode(group_id)) % partitions of __consumer_offsets (Kafka's GroupCoordinator.partitionFor,
 * records.h gr_coord_partition_for). Returns NONE and *node_id, or COORDINATOR_NOT_AVAILABLE (*node_id -1)
 * while the topic does not exist (cluster mode: the call has the topic writer create it, once at a time),
 * while the partition has no leader, or when the leader is this broker and it is fenced. The caller still
 * resolves the node's endpoint (a broker without a live registration is COORDINATOR_NOT_AVAILABLE too). */
int16_t gr_groups_coordinator(struct gr_broker *b, struct gr_str group_id, int32_t *node_id);
/* The __consumer_offsets partition of group `group_id` (Kafka's GroupCoordinatorService.partitionFor, which
 * AddOffsetsToTxn asks): over the partition count the group coordinator maps with (b->coord: the topic's
 * actual count, which differs from offsets.topic.num.partitions when the topic was made before the setting
 * changed), else the image's __consumer_offsets count, else offsets.topic.num.partitions (what the topic
 * will be made with). */
int32_t gr_groups_partition_for(struct gr_broker *b, struct gr_str group_id);
/* Returns borrowed: the __consumer_offsets binding (durability checks), NULL when groups are not started. */
struct gr_offsets_log *gr_groups_offsets_log(struct gr_broker *b);

#endif
