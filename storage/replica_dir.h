/*
 * replica_dir.h: which log directory a replica may be placed in (AlterReplicaLogDirs, Kafka's
 * ReplicaManager.alterReplicaLogDirs). A Gregor store has one log directory, so a replica can only be
 * "moved" to the directory it is already in: the check answers whether a request's path names this store's
 * directory and whether the replica is held here, and never moves files.
 *
 * A path names the directory when it equals, byte for byte, either its absolute path as Kafka spells the
 * configured one (java.io.File.getAbsolutePath of log.dirs: a relative entry resolved against the working
 * directory, repeated and trailing '/' removed, "." and ".." kept; LogManager.isLogDirOnline compares the
 * request's string with it) or its canonical path (realpath), which is what DescribeLogDirs reports
 * (storage/log_dir_usage.h) and so what kafka-reassign-partitions.sh writes into a rollback file. Both are
 * computed once when the store opens; the check itself does no I/O. A relative path never matches.
 * Read next: server/handlers/alter_replica_log_dirs.c (the one caller).
 */
#ifndef GR_STORAGE_REPLICA_DIR_H
#define GR_STORAGE_REPLICA_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"

/* The outcome for one replica, in the order Kafka checks (ReplicaManager.alterReplicaLogDirs). */
enum gr_replica_dir_check {
    GR_REPLICA_DIR_OK,            /* held here, already in that directory: nothing to move (NONE) */
    GR_REPLICA_DIR_NAME_TOO_LONG, /* "<topic>-<partition>.<32 hex>-future" would pass 255 UTF-16 units
                                     (KAFKA-4893: INVALID_TOPIC_EXCEPTION), checked before the path */
    GR_REPLICA_DIR_NOT_FOUND,     /* the path is not this store's log directory (LOG_DIR_NOT_FOUND) */
    GR_REPLICA_DIR_OFFLINE,  /* held here but offline after a failed write or load (KAFKA_STORAGE_ERROR) */
    GR_REPLICA_DIR_NOT_HELD, /* the path is right, the replica is not held here (no such live topic, or
                                a sparse topic without that partition); the caller tells "not a replica
                                yet" from "no such partition" with its metadata */
};

/* Whether `path` (`len` bytes, not NUL-terminated) names `store`'s log directory as the comment above says.
   No I/O. */
bool gr_store_log_dir_named(const struct gr_store *store, const char *path, size_t len);

/* The check of placing replica (`topic`, `topic_len` bytes; `partition`) of `store` in directory `path`
   (`path_len` bytes). Borrows everything; no I/O, network thread. */
enum gr_replica_dir_check gr_store_replica_dir_check(struct gr_store *store, const char *topic,
                                                     size_t topic_len, int32_t partition, const char *path,
                                                     size_t path_len);

#endif
