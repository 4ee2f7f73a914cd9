/*
 * producer_ids.c: the server binding of the producer id manager: the block file in the log directory, the
 * I/O pool for its saves, the monotonic clock. See server/producer_ids.h; the wait itself (who is answered
 * when) is coordinator/producer_ids.c.
 */
#include "server/producer_ids.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/member.h"
#include "cluster/producer_ids_etcd.h"
#include "common/log.h"
#include "common/time.h"
#include "coordinator/producer_ids.h"
#include "server/broker.h"
#include "storage/store.h"

#define PRODUCER_ID_FILE "producer-id-block"

static int pid_load(void *ctx, uint8_t *buf, size_t len)
{
    return gr_store_meta_read(ctx, PRODUCER_ID_FILE, buf, len);
}

static int pid_save(void *ctx, const uint8_t *buf, size_t len)
{
    return gr_store_meta_write(ctx, PRODUCER_ID_FILE, buf, len);
}

static bool pid_submit(void *ctx, struct gr_io_job *job)
{
    struct gr_broker *b = ctx;
    if (b->stopping) return false;
    gr_iopool_submit(b->iopool, job);
    return true;
}

static int64_t pid_now_ms(void *ctx)
{
    (void)ctx;
    return gr_time_mono_ms();
}

static int64_t pid_broker_epoch(void *ctx)
{
    struct gr_broker *b = ctx;
    return gr_member_broker_epoch(b->member);
}

static bool pid_may_save(void *ctx)
{
    struct gr_broker *b = ctx;
    return !b->stopping;
}

/* Cluster mode: the blocks come from etcd's counter (cluster/producer_ids_etcd.h). */
static int start_etcd(struct gr_broker *b)
{
    struct gr_producer_ids_etcd_config cfg = {.loop = b->loop,
                                              .etcd = gr_member_etcd(b->member),
                                              .lay = gr_member_layout(b->member),
                                              .broker_id = b->node_id,
                                              .broker_epoch = pid_broker_epoch,
                                              .may_save = pid_may_save,
                                              .ctx = b,
                                              .seed = (uint64_t)gr_time_mono_ms() ^ (uint64_t)b->node_id};
    if (!(b->producer_ids_etcd = gr_producer_ids_etcd_new(&cfg))) return -ENOMEM;
    b->producer_ids = gr_producer_ids_etcd_manager(b->producer_ids_etcd);
    return 0;
}

int gr_producer_ids_start(struct gr_broker *b)
{
    if (b->member) return start_etcd(b);
    struct gr_producer_id_manager *mgr = malloc(sizeof *mgr);
    if (!mgr) return -ENOMEM;
    struct gr_producer_id_io io = {pid_load, pid_save, b->store};
    /* no pool (never in the broker): the saves run inside the wait */
    struct gr_producer_id_binding bind = {b->iopool ? pid_submit : NULL, pid_now_ms, b};
    int err = gr_producer_id_manager_open(mgr, &io, &bind);
    if (err < 0) {
        GR_ERROR("cannot read %s in the log directory: %s (refusing to start: producer ids could be reused)",
                 PRODUCER_ID_FILE, err == -EINVAL ? "damaged" : strerror(-err));
        free(mgr);
        return err;
    }
    b->producer_ids = mgr;
    return 0;
}

void gr_producer_ids_stop(struct gr_broker *b)
{
    if (b->producer_ids_etcd) { /* its etcd request cancelled: no callback after this */
        gr_producer_ids_etcd_free(b->producer_ids_etcd);
        b->producer_ids_etcd = NULL;
        b->producer_ids = NULL;
        return;
    }
    free(b->producer_ids); /* after gr_iopool_destroy: no save in flight, nobody waiting */
    b->producer_ids = NULL;
}
