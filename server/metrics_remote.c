/*
 * metrics_remote.c: the broker's binding of the partition summary client (server/metrics_remote.h).
 */
#include "server/metrics_remote.h"

#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"
#include "cluster/remote_summary.h"
#include "common/log.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "protocol/errors.h"
#include "server/broker.h"

int gr_metrics_remote_start(struct gr_broker *b, gr_remote_summary_start_cb *start_moved)
{
    char err[200] = "";
    struct gr_remote_summary_config cfg = {.node_id = b->node_id,
                                           .listener_name = b->cfg.settings.inter_broker_listener,
                                           .interval_ms = GR_METRICS_REMOTE_INTERVAL_MS,
                                           .timeout_ms = GR_METRICS_REMOTE_TIMEOUT_MS,
                                           .tls_ctx = b->ib_tls_ctx,
                                           .tls_verify_host = b->ib_tls_verify_host,
                                           .sasl_mechanism = b->ib_sasl_mechanism,
                                           .sasl_username = b->ib_sasl_username,
                                           .sasl_password = b->ib_sasl_password,
                                           .sasl_oauth_login = b->ib_oauth_login};
    b->remote_summary = gr_remote_summary_new(b->loop, b->image, &cfg, start_moved, b, err, sizeof err);
    if (!b->remote_summary)
        GR_ERROR("cannot start the partition summary client: %s", err[0] ? err : "out of memory");
    return b->remote_summary ? 0 : -1;
}

void gr_metrics_remote_stop(struct gr_broker *b)
{
    gr_remote_summary_free(b->remote_summary);
    b->remote_summary = NULL;
}

struct wants {
    struct gr_broker *b;
    struct gr_remote_want *v;
    int32_t n, cap;
};

static void want_one(void *ctx, const char *topic, int32_t partition, int64_t offset, int32_t leader_epoch,
                     struct gr_str metadata)
{
    (void)leader_epoch;
    (void)metadata;
    struct wants *w = ctx;
    const struct gr_image_topic *it = gr_image_topic_find(w->b->image, topic, strlen(topic));
    const struct gr_image_partition *ip = it ? gr_image_partition(it, partition) : NULL;
    if (!ip || ip->leader < 0 || ip->leader == w->b->node_id || offset < 0) return;
    if (w->n == w->cap) {
        int32_t cap = w->cap ? w->cap * 2 : 64;
        struct gr_remote_want *v = realloc(w->v, sizeof *v * (size_t)cap);
        if (!v) return; /* left out of this refresh */
        w->v = v;
        w->cap = cap;
    }
    w->v[w->n++] = (struct gr_remote_want){it->name, partition, offset}; /* the image's name: lives on */
}

int gr_metrics_remote_refresh(struct gr_broker *b)
{
    if (!b->remote_summary || !b->coord || !b->image) return 0;
    struct wants w = {.b = b};
    int32_t ng = gr_coord_group_count(b->coord);
    for (int32_t g = 0; g < ng; g++) {
        struct gr_group *grp = gr_coord_group_at(b->coord, g);
        struct gr_str id = gr_str_c(gr_group_id(grp));
        if (gr_group_state(grp) == GR_GROUP_DEAD || gr_coord_check(b->coord, id) != GR_ERR_NONE) continue;
        gr_coord_offsets_foreach(b->coord, id, want_one, &w);
    }
    int pending = gr_remote_summary_refresh(b->remote_summary, w.v, w.n, gr_time_mono_ms());
    free(w.v);
    return pending;
}

bool gr_metrics_remote_elsewhere(struct gr_broker *b, const char *topic, int32_t partition,
                                 const struct gr_part_summary **sum)
{
    *sum = NULL;
    if (!b->remote_summary || !b->image) return false;
    const struct gr_image_topic *it = gr_image_topic_find(b->image, topic, strlen(topic));
    const struct gr_image_partition *ip = it ? gr_image_partition(it, partition) : NULL;
    if (!ip || ip->leader == b->node_id) return false;
    int32_t leader = -1;
    const struct gr_part_summary *s =
        gr_part_summaries_find(gr_remote_summary_cache(b->remote_summary), topic, partition, &leader, NULL);
    if (s && leader == ip->leader && ip->leader >= 0) *sum = s; /* from the current leader only */
    return true;
}

bool gr_metrics_remote_render(struct gr_broker *b, struct gr_prom_buf *out)
{
    if (!b->remote_summary) return !out->failed;
    const char *name = "gregor_metrics_remote_partition_errors_total";
    gr_prom_type(out, name, "counter");
    gr_prom_sample_u64(out, name, NULL, 0, gr_remote_summary_errors(b->remote_summary));
    return !out->failed;
}
