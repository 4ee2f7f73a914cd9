/*
 * producer_ids.h: the server binding of the producer id manager (coordinator/producer_ids.h): its block end
 * lives in the file "producer-id-block" of the log directory (gr_store_meta_read / gr_store_meta_write:
 * atomic replace + fsync), its saves run on the broker's I/O pool (never on the network thread) and stop
 * being started once the broker is stopping. InitProducerId (handlers/init_producer_id.c) only translates
 * the wait's answer. In cluster mode (b->member set) the blocks come from etcd's counter instead
 * (cluster/producer_ids_etcd.h, b->producer_ids_etcd owning the manager): the same wait, another source.
 * Read next: coordinator/producer_ids.h.
 */
#ifndef GR_SERVER_PRODUCER_IDS_H
#define GR_SERVER_PRODUCER_IDS_H

struct gr_broker;

/* Loads the saved block end from the log directory into a new b->producer_ids (b->store must be open, and
   b->iopool made when there is one) and starts the save of its first block; in cluster mode makes the etcd
   source instead (after gr_membership_join: it writes the broker epoch) and starts taking its first block.
   Returns 0 or -errno (a damaged file is -EINVAL: the broker must not start, or producer ids could be
   reused), after logging why. */
int gr_producer_ids_start(struct gr_broker *b);
/* Frees b->producer_ids: call after gr_iopool_destroy (no save in flight, nobody waiting) and, in cluster
   mode, before the member (whose etcd client it borrows) is freed. */
void gr_producer_ids_stop(struct gr_broker *b);

#endif
