/*
 * metrics_cluster.c: the replica manager's, partitions', controller's and kafka_exporter's topic families
 * (server/metrics_cluster.h).
 */
#include "server/metrics_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/controller.h"
#include "cluster/image.h"
#include "cluster/roles.h"
#include "partition/partition.h"
#include "server/broker.h"
#include "storage/store.h"

void gr_metrics_ctl_counts(const struct gr_image *img, struct gr_metrics_ctl_counts *c)
{
    *c = (struct gr_metrics_ctl_counts){0};
    int32_t nt = gr_image_topic_count(img);
    for (int32_t i = 0; i < nt; i++) {
        const struct gr_image_topic *t = gr_image_topic_at(img, i);
        c->topics++;
        for (int32_t p = 0; p < t->partition_count; p++) {
            const struct gr_image_partition *ip = &t->parts[p];
            c->partitions++;
            if (ip->leader < 0) c->offline++;
            if (ip->replica_count < 1 || ip->leader != gr_image_replicas(ip)[0]) c->imbalance++;
        }
    }
    int32_t nb = gr_image_broker_count(img);
    for (int32_t i = 0; i < nb; i++)
        if (!gr_image_broker_at(img, i)->fenced) c->brokers++;
}

struct gr_metrics_isr_state gr_metrics_isr_state(int32_t replicas, int32_t isr, int32_t min_isr)
{
    int32_t eff = min_isr < 1 ? 1 : min_isr;
    if (replicas < eff) eff = replicas;
    return (struct gr_metrics_isr_state){isr < replicas, isr < eff, isr == eff};
}

/* One partition led here, as the scrape saw it. */
struct led {
    const struct gr_image_topic *it; /* valid while collecting only: the image may change between steps */
    char *name;                      /* the topic's name, owned (the slices outlive the loop iteration) */
    int32_t partition;
    int32_t leader, replicas, isr;
    bool preferred;
    bool reassigning; /* a reassignment (KIP-455) in progress */
    struct gr_metrics_isr_state st;
    int64_t hw, lso, log_start;
};

/* The topic's min.insync.replicas: its own config when a valid integer >= 1, else the broker's (as
   cluster/roles.c gives the partition). */
static int32_t topic_min_isr(const struct gr_broker *b, const struct gr_image_topic *t)
{
    return gr_image_topic_min_isr(t, b->cfg.settings.min_insync_replicas);
}

/* Fills *l for partition `p` of image topic `it` when it is online and led here (route.c's rule: the image
   names this node, not self-fenced, a local log), reading the partition object; false otherwise. */
static bool led_here(struct gr_broker *b, const struct gr_image_topic *it, int32_t p, struct led *l)
{
    const struct gr_image_partition *ip = gr_image_partition(it, p);
    if (!ip || !it->local || ip->leader != b->image->node_id || b->image->self_fenced) return false;
    struct gr_log *log = gr_topic_log(it->local, p);
    if (!log || gr_log_offline(log)) return false;
    struct gr_partition *part = gr_partition_get(b->parts, log);
    if (!part) return false;
    int32_t tmp[GR_IMAGE_REPLICAS_MAX];
    int n = gr_partition_isr(part, tmp, GR_IMAGE_REPLICAS_MAX); /* the leader's committed ISR, once set */
    *l = (struct led){.it = it,
                      .partition = p,
                      .leader = ip->leader,
                      .replicas = ip->replica_count,
                      .isr = n > 0 ? n : ip->isr_count,
                      .preferred = ip->replica_count > 0 && gr_image_replicas(ip)[0] == ip->leader,
                      .reassigning = gr_image_reassigning(ip),
                      .hw = gr_partition_visible_offset(part),
                      .lso = gr_partition_last_stable_offset(part),
                      .log_start = gr_log_start_offset(log)};
    /* while a reassignment adds replicas, the replication factor is the assignment's before it (Kafka's
       OngoingReassignmentState.replicationFactor: replicas without the adding ones) */
    l->st = gr_metrics_isr_state(ip->replica_count - ip->adding_count, l->isr, topic_min_isr(b, it));
    return true;
}

/* The per-partition families over the led partitions. */
enum led_field {
    F_UNDER_REPL,
    F_UNDER_MIN,
    F_AT_MIN,
    F_ISR,
    F_REPLICAS,
    F_LSO_LAG,
    F_CURRENT,
    F_OLDEST,
    F_LEADER,
    F_PREFERRED,
};

static const struct {
    const char *name;
    enum led_field f;
} led_families[] = {
    {"kafka_cluster_partition_underreplicated", F_UNDER_REPL},
    {"kafka_cluster_partition_underminisr", F_UNDER_MIN},
    {"kafka_cluster_partition_atminisr", F_AT_MIN},
    {"kafka_cluster_partition_insyncreplicascount", F_ISR},
    {"kafka_cluster_partition_replicascount", F_REPLICAS},
    {"kafka_cluster_partition_laststableoffsetlag", F_LSO_LAG},
    {"kafka_topic_partition_current_offset", F_CURRENT},
    {"kafka_topic_partition_oldest_offset", F_OLDEST},
    {"kafka_topic_partition_leader", F_LEADER},
    {"kafka_topic_partition_replicas", F_REPLICAS},
    {"kafka_topic_partition_in_sync_replica", F_ISR},
    {"kafka_topic_partition_leader_is_preferred", F_PREFERRED},
    {"kafka_topic_partition_under_replicated_partition", F_UNDER_REPL},
};

static int64_t led_value(const struct led *l, enum led_field f)
{
    switch (f) {
    case F_UNDER_REPL:
        return l->st.under_replicated;
    case F_UNDER_MIN:
        return l->st.under_min_isr;
    case F_AT_MIN:
        return l->st.at_min_isr;
    case F_ISR:
        return l->isr;
    case F_REPLICAS:
        return l->replicas;
    case F_LSO_LAG:
        return l->hw - l->lso;
    case F_CURRENT:
        return l->hw;
    case F_OLDEST:
        return l->log_start;
    case F_LEADER:
        return l->leader;
    case F_PREFERRED:
        return l->preferred;
    }
    return 0;
}

static void gauge(struct gr_prom_buf *out, const char *name, double v)
{
    gr_prom_type(out, name, "gauge");
    gr_prom_sample(out, name, NULL, 0, v);
}

struct gr_metrics_cluster_slice {
    struct led *leds;
    int64_t nled;
    size_t family; /* led_families index being written */
    int64_t next;  /* its next led */
    bool typed;    /* its # TYPE line written */
};

void gr_metrics_cluster_slice_free(struct gr_metrics_cluster_slice *st)
{
    if (!st) return;
    for (int64_t i = 0; i < st->nled; i++)
        free(st->leds[i].name);
    free(st->leds);
    free(st);
}

/* The first step: the replica manager's counts and the led partitions' snapshot; NULL out of memory. */
static struct gr_metrics_cluster_slice *cluster_start(struct gr_broker *b, struct gr_prom_buf *out)
{
    const struct gr_image *img = b->image;
    /* the replica manager's counts over the local logs */
    int64_t held = 0, offline = 0;
    int ntopics = gr_store_topic_count(b->store);
    for (int i = 0; i < ntopics; i++) {
        struct gr_topic *t = gr_store_topic_at(b->store, i);
        for (int32_t p = 0; p < gr_topic_partition_count(t); p++) {
            struct gr_log *log = gr_topic_log(t, p);
            if (!log) continue;
            held++;
            offline += gr_log_offline(log);
        }
    }
    struct gr_metrics_cluster_slice *st = calloc(1, sizeof *st);
    struct led *leds = st ? calloc((size_t)held + 1, sizeof *leds) : NULL;
    if (!leds) {
        free(st);
        return NULL;
    }
    st->leds = leds;
    int64_t nled = 0, under_repl = 0, under_min = 0, at_min = 0, reassigning = 0;
    int32_t nt = gr_image_topic_count(img);
    for (int32_t i = 0; i < nt; i++) {
        const struct gr_image_topic *it = gr_image_topic_at(img, i);
        for (int32_t p = 0; p < it->partition_count && nled < held; p++) {
            struct led *l = &leds[nled];
            if (!led_here(b, it, p, l)) continue;
            if (!(l->name = strdup(it->name))) {
                gr_metrics_cluster_slice_free(st);
                return NULL;
            }
            st->nled = ++nled;
            under_repl += l->st.under_replicated;
            under_min += l->st.under_min_isr;
            at_min += l->st.at_min_isr;
            reassigning += l->reassigning;
        }
    }
    gauge(out, "kafka_server_replicamanager_partitioncount", (double)held);
    gauge(out, "kafka_server_replicamanager_leadercount", (double)nled);
    gauge(out, "kafka_server_replicamanager_offlinereplicacount", (double)offline);
    gauge(out, "kafka_server_replicamanager_underreplicatedpartitions", (double)under_repl);
    gauge(out, "kafka_server_replicamanager_underminisrpartitioncount", (double)under_min);
    gauge(out, "kafka_server_replicamanager_atminisrpartitioncount", (double)at_min);
    gauge(out, "kafka_server_replicamanager_reassigningpartitions", (double)reassigning);
    struct gr_roles_stats rs = {0};
    if (b->roles) gr_roles_stats(b->roles, &rs);
    gr_prom_type(out, "kafka_server_replicamanager_isrshrinks_total", "counter");
    gr_prom_sample_u64(out, "kafka_server_replicamanager_isrshrinks_total", NULL, 0,
                       (uint64_t)rs.isr_shrinks);
    gr_prom_type(out, "kafka_server_replicamanager_isrexpands_total", "counter");
    gr_prom_sample_u64(out, "kafka_server_replicamanager_isrexpands_total", NULL, 0,
                       (uint64_t)rs.isr_expands);
    return st;
}

/* The last part: the controller's figures and kafka_exporter's cluster-wide ones, read now. */
static void cluster_end(struct gr_broker *b, struct gr_prom_buf *out)
{
    const struct gr_image *img = b->image;
    int32_t nt = gr_image_topic_count(img);
    /* the controller's figures: the active controller's image (a single node is its own controller) */
    bool active = !b->member || (b->controller && gr_controller_epoch(b->controller));
    struct gr_metrics_ctl_counts c = {0};
    if (active) gr_metrics_ctl_counts(img, &c);
    gauge(out, "kafka_controller_kafkacontroller_globaltopiccount", (double)c.topics);
    gauge(out, "kafka_controller_kafkacontroller_globalpartitioncount", (double)c.partitions);
    gauge(out, "kafka_controller_kafkacontroller_offlinepartitionscount", (double)c.offline);
    gauge(out, "kafka_controller_kafkacontroller_preferredreplicaimbalancecount", (double)c.imbalance);
    /* kafka_exporter's cluster-wide figures: written once in the cluster, by the active controller */
    gr_prom_type(out, "kafka_brokers", "gauge");
    if (active) gr_prom_sample(out, "kafka_brokers", NULL, 0, (double)c.brokers);
    gr_prom_type(out, "kafka_topic_partitions", "gauge");
    if (active) {
        for (int32_t i = 0; i < nt; i++) {
            const struct gr_image_topic *it = gr_image_topic_at(img, i);
            struct gr_prom_label l = {"topic", it->name};
            gr_prom_sample(out, "kafka_topic_partitions", &l, 1, (double)it->partition_count);
        }
    }
}

int gr_metrics_cluster_render_step(struct gr_broker *b, struct gr_metrics_cluster_slice **state,
                                   size_t budget, struct gr_prom_buf *out)
{
    struct gr_metrics_cluster_slice *st = *state;
    if (!st && !(st = *state = cluster_start(b, out))) {
        out->failed = true; /* the page is refused rather than served without these families */
        return -1;
    }
    for (; st->family < sizeof led_families / sizeof led_families[0];
         st->family++, st->next = 0, st->typed = false) {
        const char *name = led_families[st->family].name;
        if (!st->typed) gr_prom_type(out, name, "gauge");
        st->typed = true;
        for (; st->next < st->nled; st->next++) {
            if (out->len >= budget) return out->failed ? -1 : 1; /* the rest next time */
            const struct led *l = &st->leds[st->next];
            char ps[16];
            snprintf(ps, sizeof ps, "%d", (int)l->partition);
            struct gr_prom_label lb[2] = {{"topic", l->name}, {"partition", ps}};
            gr_prom_sample(out, name, lb, 2, (double)led_value(l, led_families[st->family].f));
        }
    }
    cluster_end(b, out);
    gr_metrics_cluster_slice_free(st);
    *state = NULL;
    return out->failed ? -1 : 0;
}
