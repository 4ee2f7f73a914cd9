/*
 * features.h: the cluster's finalized features (KIP-584) and their changes by UpdateFeatures (api key 57).
 * Gregor finalizes one feature, transaction.version (KIP-890), supported from 0 to
 * GR_TRANSACTION_VERSION_MAX; the level and its FinalizedFeaturesEpoch live in the image (cluster/image.h),
 * fed by etcd's features key in a cluster (epoch = its mod_revision, cluster/feed.c) or by one node's file:
 *
 *   <log_dir>/gregor-features   text lines, in this order
 *     transaction.version=<level>  the finalized level (0..GR_TRANSACTION_VERSION_MAX)
 *     epoch=<epoch>                FinalizedFeaturesEpoch: +1 on every level change, never down
 *     setting=<level>              gregor.transaction.version as seen at the last start (absent in files
 *                                  written before UpdateFeatures existed: the level stands for it)
 *
 * Start-up rule (gr_features_startup): no file, the setting gives the level (epoch 0), or
 * GR_TRANSACTION_VERSION_UNSTORED for a log directory made before the file existed when the setting is not
 * given; a setting given explicitly (file or --override) that differs from the one recorded wins (an
 * operator changed it); else the stored level stands (which UpdateFeatures may have set). The setting's
 * default never overrides a stored level: as Kafka, which never changes a finalized level on an upgrade
 * (the operator runs kafka-features.sh upgrade), a log directory made when the default was 1 keeps its
 * level when the default becomes 2. The file is written only when something changed.
 *
 * An update is checked as Kafka 4.4's FeatureControlManager.updateFeature does (gr_features_check), with
 * its messages; a request with several updates fails as a whole on the first refused one (QuorumController
 * prefixes the message). Pure functions here except gr_features_etcd_write (the etcd client, on the loop).
 * Read next: server/handlers/update_features.c, cluster/local.c (the start on one node).
 */
#ifndef GR_CLUSTER_FEATURES_H
#define GR_CLUSTER_FEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/etcd.h"
#include "cluster/layout.h"

/* The highest transaction.version Gregor serves: ApiVersions' SupportedFeatures max, UpdateFeatures' bound
   (2: KIP-890 part 2, EndTxn v5 and the implicit partition adds, coordinator/txn.h gr_txn_end_tv). */
#define GR_TRANSACTION_VERSION_MAX 2
/* The level kept, when the setting is not given, by a log directory or a cluster made before the level was
   stored (no gregor-features file, no features key): 1, the default of the builds that made them. */
#define GR_TRANSACTION_VERSION_UNSTORED 1
#define GR_FEATURES_FILE "gregor-features"
#define GR_FEATURES_FILE_BYTES_MAX 256
/* Bytes of an UpdateFeatures error message (Kafka's texts with a feature name of at most this much). */
#define GR_FEATURES_MSG_BYTES 512

/* Kafka's FeatureUpdate.UpgradeType codes (UpdateFeatures v1+ UpgradeType; v0's AllowDowngrade true is
   SAFE_DOWNGRADE, false UPGRADE: UpdateFeaturesRequest.getFeature). Others are UNKNOWN. */
enum gr_feature_upgrade {
    GR_FEATURE_UPGRADE = 1,
    GR_FEATURE_SAFE_DOWNGRADE = 2,
    GR_FEATURE_UNSAFE_DOWNGRADE = 3,
};

/* One node's features file (above). */
struct gr_features_file {
    int16_t level;
    int64_t epoch;
    int16_t setting;
};

/* Checks one update of feature `name` (`len` bytes) to `level` with upgrade type `upgrade` against the
 * current finalized `current` level, as FeatureControlManager.updateFeature (Kafka 4.4): an unknown upgrade
 * type, a level below 0, a level outside what this controller supports (transaction.version 0..MAX, any
 * other feature only 0, "Local controller <controller_id> ..."), a downgrade typed UPGRADE, an upgrade typed
 * as a downgrade, level 0 of an unknown feature ("Feature <name> not found."). Returns GR_ERR_NONE, or
 * GR_ERR_INVALID_UPDATE_VERSION with Kafka's message "Invalid update version <level> for feature <name>.
 * <reason>" in msg (cap bytes, NUL-terminated, cut to fit). */
int16_t gr_features_check(const char *name, size_t len, int level, int upgrade, int16_t current,
                          int32_t controller_id, char *msg, size_t cap);

/* Parses a features file's text (`len` bytes). Returns 0 or -EINVAL (not the form above, a level outside
 * 0..INT16_MAX, an epoch below 0 or at INT64_MAX). */
int gr_features_file_parse(const char *text, size_t len, struct gr_features_file *f);
/* Writes the file's text for `f` into out (cap bytes, GR_FEATURES_FILE_BYTES_MAX is enough) and returns
 * its length (without the NUL), or -ENOSPC. */
int gr_features_file_format(const struct gr_features_file *f, char *out, size_t cap);
/* The start-up rule (above): from the file read (`old`, NULL when there is none), the setting
 * gregor.transaction.version and whether it was given explicitly (`given`; false: its default), fills *out
 * with the state to run with and returns true when it must be written (new file, level or recorded setting
 * changed). Only a given setting that differs from the recorded one changes a stored level; a default one
 * leaves the file as it is. The epoch rises by 1 exactly when the level changes. */
bool gr_features_startup(const struct gr_features_file *old, int16_t setting, bool given,
                         struct gr_features_file *out);

/* Cluster mode: writes etcd's features key with transaction.version `level` (an absent feature when 0),
 * in a txn that holds only if the key is unchanged since the image saw it (its mod_revision ==
 * `expect_epoch`; `expect_epoch` < 1: the key must be absent). done(ctx, err, epoch) runs on the loop once:
 * err 0 with the key's new mod_revision (the new FinalizedFeaturesEpoch), -EAGAIN when the key changed
 * meanwhile, -EIO when etcd failed or was unreachable. Returns 0 (done will run, never inside this call),
 * -ENOMEM or -EIO (done will not run). */
int gr_features_etcd_write(struct gr_etcd *etcd, const struct gr_cluster_layout *lay, int16_t level,
                           int64_t expect_epoch, void (*done)(void *ctx, int err, int64_t epoch), void *ctx);

#endif
