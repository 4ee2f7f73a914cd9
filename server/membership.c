/*
 * membership.c: the server's side of cluster mode (gregor.metadata.etcd.endpoints set): the member
 * (cluster/member.h) made from the typed configuration and the bound listeners, its start-up steps at the
 * right places of main.c (the cluster id before the store opens, registration and the image after, the
 * listeners opened only then), the links between image topics and local storage topics, and the leave at
 * stop. Once joined it wires the other cluster pieces to the member: the controller (cluster/controller.h,
 * given the member's lease: 0 while fenced, the new one after registering again), the replica manager
 * (cluster/replicas.h, started after the first snapshot is in the image), the role binding (cluster/roles.h:
 * local partitions become leaders or followers as the image says; its ISR changes through the ISR writer,
 * cluster/isr_writer.h) and the etcd topic writer
 * (cluster/topic_writer.h, the broker's writer in cluster mode), and the group coordinator's cluster
 * mode (server/groups.c gr_groups_cluster_start; told when a local log was made). At SIGTERM, the
 * controlled shutdown (gr_membership_shutdown_begin): the registration marked shutting_down, the loop kept
 * serving until the image shows no leadership another live ISR member could take. Stop order (main.c):
 * controller, roles and ISR writer first (no partition-state write after the loop ends), replicas before the
 * store closes, the topic writer, then the member (lease revoked, etcd client freed last). Single-node mode
 * never calls into it. Read next: cluster/member.h, server/main.c.
 */
#include <stdio.h>
#include <string.h>

#include "cluster/broker_client.h"
#include "cluster/controller.h"
#include "cluster/ctl_lease.h"
#include "cluster/member.h"
#include "cluster/fetcher.h"
#include "cluster/isr_writer.h"
#include "cluster/replicas.h"
#include "cluster/roles.h"
#include "cluster/topic_writer.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/time.h"
#include "partition/partition.h"
#include "server/metrics_remote.h"
#include "server/metrics_status.h"
#include "server/broker.h"
#include "server/groups.h"
#include "server/txns.h"
#include "server/route.h"

/* The feed's link from an image topic to this broker's storage topic: same name and same id. */
static struct gr_topic *local_topic(void *ctx, const char *name, size_t len, const uint8_t id[16])
{
    struct gr_broker *b = ctx;
    struct gr_topic *t = b->store ? gr_store_topic_find(b->store, name, len) : NULL;
    return t && memcmp(gr_topic_id(t), id, 16) == 0 ? t : NULL;
}

void gr_membership_on_topic(void *ctx, struct gr_topic *t, bool deleted)
{
    struct gr_image *img = ctx;
    struct gr_image_topic *it = gr_image_topic_find_id(img, gr_topic_id(t));
    if (!it) return; /* a topic etcd does not know: not in the image */
    if (deleted && it->local == t)
        it->local = NULL;
    else if (!deleted)
        it->local = t;
}

int gr_membership_resolve(struct gr_broker *b, const char *log_dir, const char **cluster_id)
{
    const struct gr_broker_settings *s = &b->cfg.settings;
    char dir_id[23], endpoints[GR_ETCD_ENDPOINTS_MAX * (GR_ETCD_ENDPOINT_BYTES_MAX + 1) + 1] = "";
    int rc = gr_store_meta_cluster_id(log_dir, dir_id);
    if (rc < 0) {
        GR_ERROR("cannot read %s/meta.properties: %s", log_dir, strerror(-rc));
        return -1;
    }
    for (int i = 0; i < s->gregor_metadata_etcd_endpoint_count; i++)
        snprintf(endpoints + strlen(endpoints), sizeof endpoints - strlen(endpoints), "%s%s", i ? "," : "",
                 s->gregor_metadata_etcd_endpoints[i]);
    struct gr_image_listener ls[GR_LISTENERS_MAX];
    int n = b->listener_count < GR_LISTENERS_MAX ? b->listener_count : GR_LISTENERS_MAX;
    for (int i = 0; i < n; i++) {
        snprintf(ls[i].name, sizeof ls[i].name, "%s", b->listeners[i].name);
        snprintf(ls[i].host, sizeof ls[i].host, "%s", b->listeners[i].adv_host);
        ls[i].port = b->listeners[i].adv_port;
    }
    struct gr_member_config mc = {.loop = b->loop,
                                  .endpoints = endpoints,
                                  .prefix = s->gregor_metadata_etcd_prefix,
                                  .node_id = b->node_id,
                                  .session_timeout_ms = s->broker_session_timeout_ms,
                                  .heartbeat_interval_ms = s->broker_heartbeat_interval_ms,
                                  .rack = s->broker_rack,
                                  .listeners = ls,
                                  .listener_count = n,
                                  .log_dir = log_dir,
                                  .dir_cluster_id = rc == 1 ? dir_id : NULL,
                                  .transaction_version = s->gregor_transaction_version,
                                  .img = b->image,
                                  .local = local_topic,
                                  .local_ctx = b};
    if (!(b->member = gr_member_new(&mc))) return -1;
    GR_INFO("cluster mode: etcd %s, prefix %s, node %d", endpoints, s->gregor_metadata_etcd_prefix,
            b->node_id);
    if (gr_member_resolve(b->member) < 0) return -1;
    *cluster_id = gr_member_cluster_id(b->member);
    return 0;
}

struct gr_topic_writer *gr_membership_topic_writer(struct gr_broker *b)
{
    struct gr_topic_writer_etcd_config tc = {b->loop, gr_member_etcd(b->member), gr_member_layout(b->member),
                                             b->image, 0};
    return gr_topic_writer_etcd_new(&tc);
}

/* The member's lease changed (fenced: 0; registered again: the new one): a controller lease is wanted only
 * while registered; the controller follows that lease (on_ctl_lease). */
static void on_lease_changed(void *ctx, struct gr_member *m)
{
    struct gr_broker *b = ctx;
    if (b->ctl_lease) gr_ctl_lease_want(b->ctl_lease, gr_member_lease(m) != 0);
}

static void on_ctl_lease(void *ctx, int64_t lease_id)
{
    struct gr_broker *b = ctx;
    if (!b->controller) return;
    if (b->stopping) gr_controller_shutting_down(b->controller); /* its own SIGTERM: not a lost lease */
    gr_controller_set_lease(b->controller, lease_id);
}

static void sync_configs(struct gr_broker *b);

/* The image observer of cluster mode (after each applied batch), and after a local log was made: topic
 * configs follow the records (sync_configs), and every local log of a partition this broker leads takes the
 * image's leader epoch (Kafka's makeLeader: the
 * epoch the controller wrote is the one new batches carry and CurrentLeaderEpoch checks compare with). A
 * pass over the image's partitions per applied batch (stage 1: bounded by the image's own bounds). */
/* Local log `log` of partition `p` of image topic `t` takes the image's leader epoch when this broker leads
 * it and is not fenced. */
static void take_leader_epoch(const struct gr_image *img, const struct gr_image_topic *t, int32_t p,
                              struct gr_log *log)
{
    const struct gr_image_partition *ip = gr_image_partition(t, p);
    if (!log || !ip || img->self_fenced || ip->leader != img->node_id) return;
    if (gr_log_set_leader_epoch(log, ip->leader_epoch) < 0)
        GR_WARN("%.*s-%d: cannot take leader epoch %d: out of memory", (int)t->name_len, t->name, (int)p,
                (int)ip->leader_epoch);
}

static void shutdown_check(struct gr_broker *b);

static void follow_image(void *ctx, struct gr_image *img)
{
    shutdown_check(ctx);
    sync_configs(ctx);
    gr_route_logwaits_settle(ctx); /* requests waiting for a log no longer led here: answered now */
    gr_txns_follow(ctx);           /* __transaction_state partitions led here load, others unload */
    if (img->self_fenced) return;
    for (int32_t i = 0; i < gr_image_topic_count(img); i++) {
        struct gr_image_topic *t = gr_image_topic_at(img, i);
        if (!t->local) continue;
        for (int32_t p = 0; p < t->partition_count && p < gr_topic_partition_count(t->local); p++)
            take_leader_epoch(img, t, p, gr_topic_log(t->local, p));
    }
}

/* Whether the local topic's configs equal the image topic's (the topic record's): same count, and each of
 * the image's names with the same value (at most GR_CLUSTER_TOPIC_CONFIGS_MAX each side). */
static bool configs_equal(const struct gr_image_topic *it)
{
    int n = gr_topic_config_count(it->local);
    if (n != it->config_count) return false;
    for (int32_t i = 0; i < it->config_count; i++) {
        bool found = false;
        for (int j = 0; j < n && !found; j++) {
            const char *key, *value;
            gr_topic_config_at(it->local, j, &key, &value);
            found = strcmp(key, it->configs[i].name) == 0 && strcmp(value, it->configs[i].value) == 0;
        }
        if (!found) return false;
    }
    return true;
}

static void configs_set(void *ctx, int err, struct gr_topic *t)
{
    struct gr_broker *b = ctx;
    b->config_sync.busy = false;
    if (err) {
        struct gr_image_topic *it = t ? gr_image_topic_find_id(b->image, gr_topic_id(t)) : NULL;
        GR_WARN_RATELIMITED("cluster: the local configs of topic %s cannot follow its record: %s",
                            t ? gr_topic_name(t) : "?", strerror(-err));
        if (it) {
            memcpy(b->config_sync.failed_id, it->id, 16);
            b->config_sync.failed_revision = it->record_revision;
        }
        return;
    }
    sync_configs(b); /* the next topic that differs */
}

/* The topic record's configs reach the local (sparse) topic, so its typed policy (max.message.bytes,
 * retention, cleanup, ...) is the cluster's: one gr_topic_op_set_configs at a time through the store's
 * FIFO; a refused change is not retried until the record changes. */
static void sync_configs(struct gr_broker *b)
{
    /* nothing new once the stop began (the controller is freed first) */
    if (b->config_sync.busy || !b->store || !b->controller) return;
    struct gr_image *img = b->image;
    for (int32_t i = 0; i < gr_image_topic_count(img); i++) {
        struct gr_image_topic *it = gr_image_topic_at(img, i);
        if (!it->local || it->record_revision == 0 || configs_equal(it)) continue;
        if (memcmp(it->id, b->config_sync.failed_id, 16) == 0 &&
            it->record_revision == b->config_sync.failed_revision)
            continue;
        const char *keys[GR_CLUSTER_TOPIC_CONFIGS_MAX], *values[GR_CLUSTER_TOPIC_CONFIGS_MAX];
        for (int32_t j = 0; j < it->config_count; j++) {
            keys[j] = it->configs[j].name;
            values[j] = it->configs[j].value;
        }
        struct gr_topic_op *op = gr_topic_op_set_configs(it->local, keys, values, it->config_count);
        if (!op) return; /* out of memory: the next image change tries again */
        b->config_sync.busy = true;
        gr_store_topic_op_submit(b->store, b->iopool, op, configs_set, b);
        return;
    }
}

/* The replica manager made (made) or deleted a local log: the partition's state set up (its leader epoch, its
 * topic's configs), the requests waiting until this log is made run again (server/logwait.h), and parked
 * requests re-checked (after a deletion they get NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION). */
static void on_log(void *ctx, struct gr_topic *t, int32_t partition, struct gr_log *log, bool made)
{
    struct gr_broker *b = ctx;
    if (made) { /* this partition only: the rest of the image was followed when it changed */
        const struct gr_image_topic *it = gr_image_topic_find_id(b->image, gr_topic_id(t));
        if (it) take_leader_epoch(b->image, it, partition, log);
    }
    gr_roles_on_log(b->roles, t, partition, log, made); /* its role (NULL before the binding starts) */
    if (made) {
        /* after its role: a follower's visible offset starts at its checkpointed high watermark, never at
           its log end offset (which a partition without a role would take) */
        gr_partition_visible_offset(gr_broker_partition(b, log));
        sync_configs(b);
        gr_groups_follow(b); /* a __consumer_offsets partition led here can load its groups now */
        gr_txns_follow(b);   /* and a __transaction_state partition its transactions */
    }
    gr_logwait_signal(&b->logwaits, gr_topic_id(t), partition); /* Produce and Fetch waiting for this log */
    gr_broker_wake_parked(b);
}

/* The replica fetcher and the inter-broker client it sends on (cluster/fetcher.h, broker_client.h), with
 * Kafka's replica.* settings. The client's frame cap stays socket.request.max.bytes' default: a leader's
 * answer may pass replica.fetch.response.max.bytes by one batch (KIP-74), as large as a topic allows. */
static int start_fetcher(struct gr_broker *b)
{
    const struct gr_broker_settings *s = &b->cfg.settings;
    char err[200] = "";
    struct gr_broker_client_config bcc = {.node_id = b->node_id,
                                          .listener_name = s->inter_broker_listener,
                                          .request_timeout_ms = s->replica_socket_timeout_ms,
                                          .backoff_ms = s->replica_fetch_backoff_ms,
                                          .in_flight_max = 1,
                                          .tls_ctx = b->ib_tls_ctx,
                                          .tls_verify_host = b->ib_tls_verify_host,
                                          .sasl_mechanism = b->ib_sasl_mechanism,
                                          .sasl_username = b->ib_sasl_username,
                                          .sasl_password = b->ib_sasl_password,
                                          .sasl_oauth_login = b->ib_oauth_login};
    struct gr_fetcher_config fc = {.node_id = b->node_id,
                                   .num_fetchers = s->num_replica_fetchers,
                                   .max_wait_ms = s->replica_fetch_wait_max_ms,
                                   .min_bytes = s->replica_fetch_min_bytes,
                                   .partition_max_bytes = s->replica_fetch_max_bytes,
                                   .response_max_bytes = s->replica_fetch_response_max_bytes,
                                   .backoff_ms = s->replica_fetch_backoff_ms,
                                   .fsync_gate = s->gregor_acks_all_fsync};
    if (!(b->broker_client = gr_broker_client_new(b->loop, b->image, &bcc, err, sizeof err)) ||
        !(b->fetcher = gr_fetcher_new(b->loop, b->broker_client, b->image, &fc, err, sizeof err))) {
        GR_ERROR("cannot start the replica fetcher: %s", err[0] ? err : "out of memory");
        return -1;
    }
    return 0;
}

/* The replica fetcher, the ISR writer and the role binding, after the replica manager (whose pass links the
 * image's topics to the local logs first). */
static int start_roles(struct gr_broker *b)
{
    const struct gr_broker_settings *s = &b->cfg.settings;
    if (start_fetcher(b) < 0 || gr_metrics_remote_start(b, gr_metrics_status_remote_moved) < 0) return -1;
    b->isr_writer = gr_isr_writer_new(b->loop, gr_member_etcd(b->member), gr_member_layout(b->member),
                                      b->image, b->node_id);
    struct gr_roles_config rc = {.loop = b->loop,
                                 .parts = b->parts,
                                 .replica_lag_time_max_ms = s->replica_lag_time_max_ms,
                                 .min_insync_replicas = s->min_insync_replicas};
    gr_roles_ops_fetcher(&rc.ops, b->fetcher);
    if (b->isr_writer) gr_roles_ops_isr_writer(&rc.ops, b->isr_writer);
    if (!b->isr_writer || !(b->roles = gr_roles_new(&rc, b->image)) || gr_roles_start(b->roles) < 0) {
        GR_ERROR("cannot start the role binding");
        return -1;
    }
    return 0;
}

int gr_membership_join(struct gr_broker *b)
{
    if (gr_member_join(b->member) < 0) return -1;
    /* the image holds the first snapshot now: the group coordinator (which the replica manager is given),
       local replicas follow it, the controller campaigns */
    if (gr_groups_cluster_start(b) < 0) {
        GR_ERROR("cannot start the group coordinator");
        return -1;
    }
    if (gr_txns_cluster_start(b) < 0) {
        GR_ERROR("cannot start the transaction coordinator");
        return -1;
    }
    struct gr_replicas_config rc = {
        .store = b->store, .pool = b->iopool, .loop = b->loop, .on_log = on_log, .ctx = b, .coord = b->coord};
    if (!(b->replicas = gr_replicas_new(&rc, b->image)) || gr_replicas_start(b->replicas) < 0) {
        GR_ERROR("cannot start the replica manager");
        return -1;
    }
    if (start_roles(b) < 0) return -1;
    b->controller = gr_controller_new(b->loop, gr_member_etcd(b->member), gr_member_layout(b->member),
                                      b->image, b->node_id);
    if (!b->controller) {
        GR_ERROR("cannot start the controller");
        return -1;
    }
    gr_controller_set_unclean(b->controller, b->cfg.settings.unclean_leader_election_enable, 0);
    gr_controller_set_rebalance(b->controller, b->cfg.settings.auto_leader_rebalance_enable,
                                b->cfg.settings.leader_imbalance_check_interval_s);
    if (gr_image_observe(b->image, follow_image, b) < 0) {
        GR_ERROR("cannot observe the metadata image: no observer slot left");
        return -1;
    }
    follow_image(b, b->image);
    b->ctl_lease = gr_ctl_lease_new(b->loop, gr_member_etcd(b->member),
                                    b->cfg.settings.controller_quorum_fetch_timeout_ms, on_ctl_lease, b);
    if (!b->ctl_lease) {
        GR_ERROR("cannot start the controller lease");
        return -1;
    }
    gr_member_on_lease_changed(b->member, on_lease_changed, b);
    on_lease_changed(b, b->member);
    return 0;
}

/* ---- controlled shutdown (gr_membership_shutdown_begin) ---- */

/* The wait is over: the loop ends and main.c's stop path runs. */
static void shutdown_end(struct gr_broker *b)
{
    b->ctl_shutdown.waiting = false;
    ev_timer_stop(b->loop, &b->ctl_shutdown.deadline_w);
    b->stopping = true;
    ev_break(b->loop, EVBREAK_ALL);
}

/* After each image change while waiting: done once this broker leads nothing another live ISR member can
 * take (or it is fenced: it leads nothing then); otherwise logs the count when it changed. */
static void shutdown_check(struct gr_broker *b)
{
    if (!b->ctl_shutdown.waiting) return;
    const struct gr_image_topic *t = NULL;
    int32_t p = -1;
    int32_t n = b->image->self_fenced ? 0 : gr_controller_movable_leaderships(b->image, b->node_id, &t, &p);
    long long waited_ms = (long long)(gr_time_mono_ms() - b->ctl_shutdown.started_ms);
    if (n == 0) {
        GR_INFO("controlled shutdown: leading no partition another live ISR member can take after %lld ms%s",
                waited_ms, b->image->self_fenced ? " (fenced)" : "");
        return shutdown_end(b);
    }
    if (n == b->ctl_shutdown.logged_count) return;
    b->ctl_shutdown.logged_count = n;
    GR_INFO("controlled shutdown: waiting for the controller to move %d leaderships (first %.*s-%d) to other "
            "live ISR members (%lld of at most %d ms)",
            (int)n, (int)t->name_len, t->name, (int)p, waited_ms, GR_CONTROLLED_SHUTDOWN_WAIT_MS);
}

static void shutdown_deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker *b = w->data;
    const struct gr_image_topic *t = NULL;
    int32_t p = -1;
    int32_t n = gr_controller_movable_leaderships(b->image, b->node_id, &t, &p);
    GR_WARN("controlled shutdown: still leading %d partitions another live ISR member could take (first "
            "%.*s-%d) after %d ms: stopping anyway",
            (int)n, t ? (int)t->name_len : 1, t ? t->name : "?", (int)p, GR_CONTROLLED_SHUTDOWN_WAIT_MS);
    shutdown_end(b);
}

/* The mark is written (rc 0: the controller moves the leaderships from its next plan) or refused (-ESTALE:
 * the registration is no longer this process's, so no controller is told: the wait cannot end well). */
static void on_marked(void *ctx, int rc)
{
    struct gr_broker *b = ctx;
    if (!b->ctl_shutdown.waiting) return;
    if (rc < 0) {
        GR_WARN("controlled shutdown: the shutting_down mark was refused: stopping without waiting");
        return shutdown_end(b);
    }
    shutdown_check(b);
}

bool gr_membership_shutdown_begin(struct gr_broker *b)
{
    if (!b->member || !b->controller || !b->cfg.settings.controlled_shutdown_enable ||
        !gr_member_ready(b->member))
        return false;
    gr_member_mark(b->member, on_marked, b); /* the leave (gr_member_leave) sends it if still in flight */
    if (gr_controller_movable_leaderships(b->image, b->node_id, NULL, NULL) == 0) {
        GR_INFO("controlled shutdown: leading no partition another live ISR member can take");
        return false;
    }
    b->ctl_shutdown.waiting = true;
    b->ctl_shutdown.started_ms = gr_time_mono_ms();
    b->ctl_shutdown.logged_count = 0;
    ev_timer_init(&b->ctl_shutdown.deadline_w, shutdown_deadline_cb, GR_CONTROLLED_SHUTDOWN_WAIT_MS / 1000.0,
                  0.0);
    b->ctl_shutdown.deadline_w.data = b;
    ev_timer_start(b->loop, &b->ctl_shutdown.deadline_w);
    shutdown_check(b); /* logs what it waits for */
    return true;
}

void gr_membership_stop_controller(struct gr_broker *b)
{
    b->ctl_shutdown.waiting = false; /* a second signal ended the wait early: its deadline goes too */
    if (ev_is_active(&b->ctl_shutdown.deadline_w)) ev_timer_stop(b->loop, &b->ctl_shutdown.deadline_w);
    if (b->member) {
        gr_member_on_lease_changed(b->member, NULL, NULL);
        gr_image_unobserve(b->image, follow_image, b);
    }
    /* the controller key goes at once (its lease revoked; gr_membership_stop's loop run carries the
       request), then no partition-state write after this */
    if (b->ctl_lease) gr_ctl_lease_want(b->ctl_lease, false);
    gr_controller_free(b->controller);
    b->controller = NULL;
    gr_roles_free(b->roles); /* fetches stopped, ISR changes cancelled, the partitions' hooks removed */
    b->roles = NULL;
    gr_isr_writer_free(b->isr_writer);
    b->isr_writer = NULL;
    gr_fetcher_free(b->fetcher); /* no append after this (the role binding removed every partition) */
    b->fetcher = NULL;
    gr_metrics_remote_stop(b); /* its own inter-broker client */
    gr_txns_stop_markers(b);   /* its connections first: they belong to the inter-broker client */
    gr_broker_client_free(b->broker_client);
    b->broker_client = NULL;
}

void gr_membership_stop_replicas(struct gr_broker *b)
{
    gr_replicas_free(b->replicas);
    b->replicas = NULL;
}

void gr_membership_stop(struct gr_broker *b)
{
    if (!b->member) return;
    gr_member_leave(b->member);
    gr_ctl_lease_free(b->ctl_lease); /* before the etcd client it borrows */
    b->ctl_lease = NULL;
    gr_member_free(b->member);
    b->member = NULL;
}
