/*
 * local.h: the single-node source of the metadata image (cluster/image.h): the cluster as one broker sees
 * it without etcd. One broker (this node, every listener the broker bound, at its advertised host and
 * port), this node the controller, the cluster id of the log directory's meta.properties, and every topic
 * of the store: each partition led by this node with its log's leader epoch, replicas = ISR = {this node}.
 * A log that went offline stays "led here" in the image: that is a local log fact, which the Metadata,
 * Produce and Fetch paths read from the log itself (KAFKA_STORAGE_ERROR), as before.
 *
 * It is kept current by the store's topic hook (gr_store_config.on_topic_changed = gr_image_local_on_topic,
 * ctx = the image), which storage calls wherever a topic operation completes (create, delete, new
 * partitions), on the network thread. Read next: cluster/image.h, server/main.c (the wiring).
 */
#ifndef GR_CLUSTER_LOCAL_H
#define GR_CLUSTER_LOCAL_H

#include <stdbool.h>

#include "cluster/image.h"
#include "storage/store.h"

/* Fills `img` (fresh from gr_image_new, its node id set) from `store`: cluster id, this broker with
 * `listeners` (`count` of them, copied; 0..GR_LISTENERS_MAX), controller = this node, and every live topic.
 * Returns 0, -EINVAL (a bad listener or cluster id), -ENOSPC (the store holds more than the image's bounds)
 * or -ENOMEM. */
int gr_image_local_load(struct gr_image *img, struct gr_store *store,
                        const struct gr_image_listener *listeners, int count);

/* The store's topic hook (storage/store.h on_topic_changed): `ctx` is the image; `t` was created, grew or
 * had its configs changed (deleted false), or was deleted. Puts or removes the topic. Out of memory the
 * image keeps its previous state for that topic and a warning is logged. */
void gr_image_local_on_topic(void *ctx, struct gr_topic *t, bool deleted);

/* One node's finalized features (ApiVersions v3+, KIP-584) at start-up: reads `<dir>/gregor-features`
 * (format and rule: cluster/features.h gr_features_startup) with `setting` = gregor.transaction.version,
 * `given` whether it was set explicitly, `dir_old` whether the directory was there before this start (its
 * meta.properties existed: with no file and no given setting it keeps GR_TRANSACTION_VERSION_UNSTORED),
 * writes it again when the rule says so (a temporary file, fsync, rename, fsync of the directory), and sets
 * img->transaction_version and img->features_epoch; *out gets the file's state (UpdateFeatures' next write
 * starts from it). Returns 0, or -errno (unreadable or unwritable; -EINVAL not in that form; -ERANGE a
 * stored level above GR_TRANSACTION_VERSION_MAX). Startup only (blocking I/O). */
struct gr_features_file;
int gr_image_local_features(struct gr_image *img, const char *dir, int16_t setting, bool given, bool dir_old,
                            struct gr_features_file *out);

#endif
