/*
 * feed.h: applies etcd key-values of the cluster's root (cluster/layout.h) to the metadata image
 * (cluster/image.h), from a snapshot (a paged range at one revision, or a watch's resync) or from watch
 * events. Pure: no I/O, no event loop; the member (cluster/member.h) hands it what etcd returned.
 *
 *   KEY                            APPLIED AS
 *   brokers/<node id>              broker: value's listeners, rack, shutting_down; epoch = create_revision
 *   controller                     controller node id; controller_epoch = create_revision
 *   topics/<name>                  topic: id, partition count, replicas per partition (the assignment),
 *                                  internal = the name is __consumer_offsets; record_revision = mod_revision
 *   partitions/<topic id>/<p>      leader, leader epoch, ISR; partition_epoch = mod_revision
 *   features, producer_ids, unknown kinds: ignored here
 *
 * Invariants: a batch (a snapshot, or the events of one watch response) ends with one gr_image_changed and
 * img->revision set to the batch's revision; observers never see half a batch. A malformed key or value is
 * ignored whole with a rate-limited warning naming the key (nothing of it applied). A snapshot replaces the
 * whole content: at its start the image's brokers, topics and controller are dropped (pointers into the
 * image die; observers run only at its end) and what the snapshot holds is put back. A snapshot arrives in
 * key order, so `partitions/<id>/..` come before `topics/<name>`: a partition state whose topic id is not in
 * the image is kept aside (at most GR_FEED_PENDING_MAX, in memory bounded by that count) and applied when a
 * topic record with that id arrives; a pending state deleted before that is dropped. Replicas always come
 * from the topic record, leader / epoch / ISR from the state, so either may arrive first.
 *
 * Read next: cluster/member.h (who calls it), cluster/tests/test_feed.c.
 */
#ifndef GR_CLUSTER_FEED_H
#define GR_CLUSTER_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/image.h"
#include "cluster/layout.h"

/* Partition states kept for topic ids not (yet) in the image: as many as the image may hold partitions. */
#define GR_FEED_PENDING_MAX GR_IMAGE_PARTITIONS_MAX

/* One key-value as etcd gave it (mvccpb.KeyValue, or a watch event): borrowed for the call. For a deletion
 * (deleted true) only key and mod_revision matter. */
struct gr_feed_kv {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    bool deleted;
};

/* Finds this broker's local storage topic for a topic of the image (name, id), or NULL: the link
 * gr_image_put_topic keeps (route.c serves a partition only through it). */
typedef struct gr_topic *gr_feed_local_fn(void *ctx, const char *name, size_t name_len, const uint8_t id[16]);

struct gr_feed;

/* Returns new: a feed writing into `img` (borrowed) for the keys of `lay` (copied); `local` (may be NULL)
 * with `local_ctx` links topics to local storage. NULL when out of memory. */
struct gr_feed *gr_feed_new(struct gr_image *img, const struct gr_cluster_layout *lay,
                            gr_feed_local_fn *local, void *local_ctx);
/* Frees the feed (NULL ignored); the image stays. */
void gr_feed_free(struct gr_feed *feed);

/* Starts a snapshot: drops the image's brokers, topics, controller and every pending state. */
void gr_feed_snapshot_begin(struct gr_feed *feed);
/* Applies one key-value (snapshot entry or watch event; deleted only for events). Returns 0 when applied or
 * ignored on purpose (a key of another kind, a pending state), -EINVAL when the key or value was malformed
 * (warned, nothing applied), -ENOSPC / -ENOMEM when a bound or memory refused it (warned, nothing applied).
 */
int gr_feed_apply(struct gr_feed *feed, const struct gr_feed_kv *kv);
/* Ends a batch (a snapshot or a watch response) at etcd revision `revision`: sets img->revision (never
 * backwards) and calls gr_image_changed once. */
void gr_feed_commit(struct gr_feed *feed, int64_t revision);
/* Pending partition states (tests and logs). */
size_t gr_feed_pending(const struct gr_feed *feed);

#endif
