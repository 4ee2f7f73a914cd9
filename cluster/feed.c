/*
 * feed.c: etcd key-values into the metadata image (cluster/feed.h). Pending partition states live in one
 * array, appended to and sorted by (topic id, partition) only when a lookup needs it: a snapshot appends
 * every state before any topic record, so it sorts once. Applied or deleted entries are marked dead
 * and squeezed out at the batch's commit. Read next: cluster/member.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/feed.h"
#include "cluster/values.h"
#include "common/log.h"

struct pending {
    uint8_t id[16];
    int32_t partition;
    bool dead; /* applied or deleted: skipped, dropped at the next commit (the sort order stays) */
    int32_t leader, leader_epoch, isr_count;
    int64_t partition_epoch;
    int32_t isr[GR_CLUSTER_REPLICAS_MAX];
};

struct gr_feed {
    struct gr_image *img;
    struct gr_cluster_layout lay;
    gr_feed_local_fn *local;
    void *local_ctx;
    struct pending *pend;
    size_t pend_count, pend_cap, pend_live;
    bool pend_sorted;
    bool in_snapshot; /* keys of a snapshot are unique: appended without a lookup */
};

struct gr_feed *gr_feed_new(struct gr_image *img, const struct gr_cluster_layout *lay,
                            gr_feed_local_fn *local, void *local_ctx)
{
    struct gr_feed *feed = calloc(1, sizeof *feed);
    if (!feed) return NULL;
    feed->img = img;
    feed->lay = *lay;
    feed->local = local;
    feed->local_ctx = local_ctx;
    feed->pend_sorted = true;
    return feed;
}

void gr_feed_free(struct gr_feed *feed)
{
    if (!feed) return;
    free(feed->pend);
    free(feed);
}

size_t gr_feed_pending(const struct gr_feed *feed)
{
    return feed->pend_live;
}

static int pend_cmp(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    int c = memcmp(x->id, y->id, 16);
    if (c) return c;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

/* Index of the first entry >= (id, partition) in the sorted array. */
static size_t pend_lower(struct gr_feed *feed, const uint8_t id[16], int32_t partition)
{
    if (!feed->pend_sorted) {
        qsort(feed->pend, feed->pend_count, sizeof *feed->pend, pend_cmp);
        feed->pend_sorted = true;
    }
    struct pending key = {.partition = partition};
    memcpy(key.id, id, 16);
    size_t lo = 0, hi = feed->pend_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pend_cmp(&feed->pend[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct pending *pend_find(struct gr_feed *feed, const uint8_t id[16], int32_t partition)
{
    for (size_t i = pend_lower(feed, id, partition);
         i < feed->pend_count && !memcmp(feed->pend[i].id, id, 16) && feed->pend[i].partition == partition;
         i++)
        if (!feed->pend[i].dead) return &feed->pend[i];
    return NULL;
}

static void pend_kill(struct gr_feed *feed, struct pending *p)
{
    p->dead = true;
    feed->pend_live--;
}

static int pend_put(struct gr_feed *feed, const uint8_t id[16], int32_t partition,
                    const struct gr_cluster_partition *st, int64_t partition_epoch)
{
    struct pending *p = feed->in_snapshot ? NULL : pend_find(feed, id, partition);
    if (!p) {
        if (feed->pend_live >= GR_FEED_PENDING_MAX) return -ENOSPC;
        if (feed->pend_count == feed->pend_cap) {
            size_t cap = feed->pend_cap ? feed->pend_cap * 2 : 64;
            struct pending *n = realloc(feed->pend, cap * sizeof *n);
            if (!n) return -ENOMEM;
            feed->pend = n;
            feed->pend_cap = cap;
        }
        p = &feed->pend[feed->pend_count++];
        feed->pend_sorted = feed->pend_count == 1;
        feed->pend_live++;
    }
    memcpy(p->id, id, 16);
    p->partition = partition;
    p->dead = false;
    p->leader = st->leader;
    p->leader_epoch = st->leader_epoch;
    p->isr_count = st->isr_count;
    if (st->isr_count) memcpy(p->isr, st->isr, sizeof(int32_t) * (size_t)st->isr_count);
    p->partition_epoch = partition_epoch;
    return 0;
}

/* Drops dead entries (order kept, so a sorted array stays sorted). */
static void pend_squeeze(struct gr_feed *feed)
{
    size_t k = 0;
    for (size_t i = 0; i < feed->pend_count; i++)
        if (!feed->pend[i].dead) feed->pend[k++] = feed->pend[i];
    feed->pend_count = k;
}

/* The topic record's configs into the image topic (sorted copies, bounded by gr_image_set_topic_configs:
 * GR_CLUSTER_TOPIC_CONFIGS_MAX entries, name and value caps). Returns 0 or its -errno. */
static int set_configs(struct gr_image *img, struct gr_image_topic *t, const struct gr_cluster_topic *v)
{
    if (v->config_count < 0 || v->config_count > GR_CLUSTER_TOPIC_CONFIGS_MAX) return -E2BIG;
    const char *names[GR_CLUSTER_TOPIC_CONFIGS_MAX];
    const char *values[GR_CLUSTER_TOPIC_CONFIGS_MAX];
    for (int32_t i = 0; i < v->config_count; i++) {
        names[i] = v->configs[i].name;
        values[i] = v->configs[i].value;
    }
    return gr_image_set_topic_configs(img, t, names, values, v->config_count);
}

/* Sets partition `p` of `t`: leader, epoch, ISR and partition epoch from the arguments, replicas (and a
 * reassignment's adding and removing lists, from the topic record) kept. */
static int set_state(struct gr_image *img, struct gr_image_topic *t, int32_t p, int32_t leader, int32_t epoch,
                     const int32_t *isr, int32_t isr_count, int64_t partition_epoch)
{
    const struct gr_image_partition *cur = gr_image_partition(t, p);
    int32_t replicas[GR_IMAGE_REPLICAS_MAX], isr_copy[GR_IMAGE_REPLICAS_MAX];
    int32_t adding[GR_IMAGE_REPLICAS_MAX], removing[GR_IMAGE_REPLICAS_MAX];
    int32_t rc_count = cur->replica_count;
    if (rc_count) memcpy(replicas, gr_image_replicas(cur), sizeof(int32_t) * (size_t)rc_count);
    if (cur->adding_count) memcpy(adding, gr_image_adding(cur), sizeof(int32_t) * (size_t)cur->adding_count);
    if (cur->removing_count)
        memcpy(removing, gr_image_removing(cur), sizeof(int32_t) * (size_t)cur->removing_count);
    if (isr_count > GR_IMAGE_REPLICAS_MAX) return -EINVAL;
    if (isr_count) memcpy(isr_copy, isr, sizeof(int32_t) * (size_t)isr_count);
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = epoch,
                                          .partition_epoch = partition_epoch,
                                          .replicas = replicas,
                                          .replica_count = rc_count,
                                          .isr = isr_copy,
                                          .isr_count = isr_count,
                                          .adding = adding,
                                          .adding_count = cur->adding_count,
                                          .removing = removing,
                                          .removing_count = cur->removing_count};
    return gr_image_set_partition(img, t, p, &st);
}

static void warn(const struct gr_feed_kv *kv, const char *why)
{
    GR_WARN_RATELIMITED("cluster metadata: %.*s: %s (ignored)", (int)(kv->key_len > 512 ? 512 : kv->key_len),
                        kv->key, why);
}

static int apply_broker(struct gr_feed *feed, const struct gr_feed_kv *kv, int32_t node_id)
{
    if (kv->deleted) {
        gr_image_remove_broker(feed->img, node_id);
        return 0;
    }
    struct gr_cluster_broker v;
    char err[GR_CLUSTER_ERR_BYTES];
    int rc = gr_cluster_broker_decode(kv->value, kv->value_len, &v, err);
    if (rc < 0) {
        warn(kv, rc == -EINVAL ? err : strerror(-rc));
        return rc;
    }
    if (v.node_id != node_id) {
        warn(kv, "node_id differs from the key's");
        return -EINVAL;
    }
    struct gr_image_broker br = {.node_id = node_id,
                                 .epoch = kv->create_revision,
                                 .shutting_down = v.shutting_down,
                                 .log_dir_new = v.log_dir_new,
                                 .has_rack = v.has_rack,
                                 .listener_count = v.listener_count};
    _Static_assert(GR_CLUSTER_LISTENERS_MAX <= GR_LISTENERS_MAX, "listeners fit the image");
    _Static_assert(GR_CLUSTER_RACK_BYTES_MAX <= GR_RACK_BYTES_MAX, "rack fits the image");
    _Static_assert(GR_CLUSTER_HOST_BYTES_MAX <= GR_HOST_BYTES_MAX, "host fits the image");
    _Static_assert(GR_CLUSTER_LISTENER_NAME_BYTES_MAX <= GR_LISTENER_NAME_BYTES_MAX, "name fits the image");
    if (v.has_rack) memcpy(br.rack, v.rack, sizeof v.rack);
    for (int i = 0; i < v.listener_count; i++) {
        memcpy(br.listeners[i].name, v.listeners[i].name, sizeof v.listeners[i].name);
        memcpy(br.listeners[i].host, v.listeners[i].host, sizeof v.listeners[i].host);
        br.listeners[i].port = v.listeners[i].port;
    }
    if ((rc = gr_image_set_broker(feed->img, &br)) < 0) warn(kv, strerror(-rc));
    return rc;
}

/* The features key: the transaction.version level (absent from the key: 0) and its mod_revision as the
 * FinalizedFeaturesEpoch. Deleted: the epoch is unknown again (-1), the level kept. */
static int apply_features(struct gr_feed *feed, const struct gr_feed_kv *kv)
{
    if (kv->deleted) {
        feed->img->features_epoch = -1;
        return 0;
    }
    struct gr_cluster_features v;
    char err[GR_CLUSTER_ERR_BYTES];
    int rc = gr_cluster_features_decode(kv->value, kv->value_len, &v, err);
    if (rc < 0) {
        warn(kv, rc == -EINVAL ? err : strerror(-rc));
        return rc;
    }
    int16_t level = 0;
    for (int i = 0; i < v.count; i++)
        if (strcmp(v.features[i].name, "transaction.version") == 0) level = v.features[i].level;
    feed->img->transaction_version = level;
    feed->img->features_epoch = kv->mod_revision;
    return 0;
}

static int apply_controller(struct gr_feed *feed, const struct gr_feed_kv *kv)
{
    if (kv->deleted) {
        gr_image_set_controller(feed->img, -1);
        feed->img->controller_epoch = 0;
        return 0;
    }
    struct gr_cluster_controller v;
    char err[GR_CLUSTER_ERR_BYTES];
    int rc = gr_cluster_controller_decode(kv->value, kv->value_len, &v, err);
    if (rc < 0) {
        warn(kv, rc == -EINVAL ? err : strerror(-rc));
        return rc;
    }
    gr_image_set_controller(feed->img, v.node_id);
    feed->img->controller_epoch = kv->create_revision;
    return 0;
}

/* Applies the pending states of topic `t` (every partition in range) and marks them dead. */
static void apply_pending(struct gr_feed *feed, struct gr_image_topic *t)
{
    if (!feed->pend_live) return;
    for (size_t i = pend_lower(feed, t->id, 0); i < feed->pend_count && !memcmp(feed->pend[i].id, t->id, 16);
         i++) {
        struct pending *p = &feed->pend[i];
        if (p->dead || p->partition >= t->partition_count) continue;
        int rc = set_state(feed->img, t, p->partition, p->leader, p->leader_epoch, p->isr, p->isr_count,
                           p->partition_epoch);
        if (rc < 0)
            GR_WARN_RATELIMITED("cluster metadata: %s-%d: state not applied (%s)", t->name, p->partition,
                                strerror(-rc));
        pend_kill(feed, p);
    }
}

static int apply_topic(struct gr_feed *feed, const struct gr_feed_kv *kv, const struct gr_cluster_key *k)
{
    struct gr_image *img = feed->img;
    if (kv->deleted) {
        struct gr_image_topic *t = gr_image_topic_find(img, k->topic, k->topic_len);
        if (t) gr_image_remove_topic(img, t->id);
        return 0;
    }
    struct gr_cluster_topic v;
    char err[GR_CLUSTER_ERR_BYTES];
    int rc = gr_cluster_topic_decode(kv->value, kv->value_len, &v, err);
    if (rc < 0) {
        warn(kv, rc == -EINVAL ? err : strerror(-rc));
        return rc;
    }
    struct gr_image_topic *t = gr_image_topic_find_id(img, v.topic_id.b);
    if (t && (t->name_len != (int32_t)k->topic_len || memcmp(t->name, k->topic, k->topic_len))) {
        warn(kv, "topic_id already names another topic");
        gr_cluster_topic_free(&v);
        return -EINVAL;
    }
    if (t && v.partition_count < t->partition_count) {
        warn(kv, "fewer partitions than before");
        gr_cluster_topic_free(&v);
        return -EINVAL;
    }
    for (int32_t p = 0; p < v.partition_count; p++)
        if (v.partitions[p].replica_count > GR_IMAGE_REPLICAS_MAX) {
            warn(kv, "too many replicas");
            gr_cluster_topic_free(&v);
            return -EINVAL;
        }
    struct gr_topic *local =
        feed->local ? feed->local(feed->local_ctx, k->topic, k->topic_len, v.topic_id.b) : NULL;
    bool internal = (k->topic_len == 18 && memcmp(k->topic, "__consumer_offsets", 18) == 0) ||
                    (k->topic_len == 19 && memcmp(k->topic, "__transaction_state", 19) == 0);
    rc =
        gr_image_put_topic(img, k->topic, k->topic_len, v.topic_id.b, internal, v.partition_count, local, &t);
    if (rc < 0) {
        warn(kv, strerror(-rc));
        gr_cluster_topic_free(&v);
        return rc;
    }
    t->record_revision = kv->mod_revision;
    rc = set_configs(img, t, &v); /* the record's configs: DescribeConfigs on any broker, local policies */
    for (int32_t p = 0; p < v.partition_count && rc == 0; p++) {
        const struct gr_image_partition *cur = gr_image_partition(t, p);
        int32_t isr[GR_IMAGE_REPLICAS_MAX];
        int32_t isr_count = cur->isr_count;
        if (isr_count) memcpy(isr, gr_image_isr(cur), sizeof(int32_t) * (size_t)isr_count);
        struct gr_image_partition_state st = {.leader = cur->leader,
                                              .leader_epoch = cur->leader_epoch,
                                              .partition_epoch = cur->partition_epoch,
                                              .replicas = v.partitions[p].replicas,
                                              .replica_count = v.partitions[p].replica_count,
                                              .isr = isr,
                                              .isr_count = isr_count,
                                              .adding = v.partitions[p].adding,
                                              .adding_count = v.partitions[p].adding_count,
                                              .removing = v.partitions[p].removing,
                                              .removing_count = v.partitions[p].removing_count};
        rc = gr_image_set_partition(img, t, p, &st);
    }
    gr_cluster_topic_free(&v);
    if (rc < 0) warn(kv, strerror(-rc));
    apply_pending(feed, t);
    return rc;
}

static int apply_partition(struct gr_feed *feed, const struct gr_feed_kv *kv, const struct gr_cluster_key *k)
{
    struct gr_image_topic *t = gr_image_topic_find_id(feed->img, k->topic_id.b);
    if (kv->deleted) {
        if (t && k->partition < t->partition_count)
            return set_state(feed->img, t, k->partition, -1, -1, NULL, 0, 0);
        if (!t && feed->pend_live) {
            struct pending *p = pend_find(feed, k->topic_id.b, k->partition);
            if (p) pend_kill(feed, p);
        }
        return 0;
    }
    struct gr_cluster_partition v;
    char err[GR_CLUSTER_ERR_BYTES];
    int rc = gr_cluster_partition_decode(kv->value, kv->value_len, &v, err);
    if (rc < 0) {
        warn(kv, rc == -EINVAL ? err : strerror(-rc));
        return rc;
    }
    if (v.isr_count > GR_IMAGE_REPLICAS_MAX) {
        warn(kv, "too many in the ISR");
        return -EINVAL;
    }
    if (!t || k->partition >= t->partition_count) { /* its topic record (or its growth) comes later */
        rc = pend_put(feed, k->topic_id.b, k->partition, &v, kv->mod_revision);
        if (rc < 0) warn(kv, strerror(-rc));
        return rc;
    }
    rc =
        set_state(feed->img, t, k->partition, v.leader, v.leader_epoch, v.isr, v.isr_count, kv->mod_revision);
    if (rc < 0) warn(kv, strerror(-rc));
    return rc;
}

int gr_feed_apply(struct gr_feed *feed, const struct gr_feed_kv *kv)
{
    struct gr_cluster_key k;
    int rc = gr_cluster_key_parse(&feed->lay, kv->key, kv->key_len, &k);
    if (rc == -ENOENT) return 0; /* a later version's key */
    if (rc < 0) {
        warn(kv, "not a key of the layout");
        return rc;
    }
    switch (k.kind) {
    case GR_CLUSTER_KEY_BROKER:
        return apply_broker(feed, kv, k.node_id);
    case GR_CLUSTER_KEY_CONTROLLER:
        return apply_controller(feed, kv);
    case GR_CLUSTER_KEY_TOPIC:
        return apply_topic(feed, kv, &k);
    case GR_CLUSTER_KEY_PARTITION:
        return apply_partition(feed, kv, &k);
    case GR_CLUSTER_KEY_FEATURES:
        return apply_features(feed, kv);
    case GR_CLUSTER_KEY_PRODUCER_IDS:
        return 0; /* read by its own module */
    }
    return 0;
}

void gr_feed_snapshot_begin(struct gr_feed *feed)
{
    struct gr_image *img = feed->img;
    while (gr_image_topic_count(img) > 0) {
        uint8_t id[16];
        memcpy(id, gr_image_topic_at(img, gr_image_topic_count(img) - 1)->id, 16);
        gr_image_remove_topic(img, id);
    }
    while (gr_image_broker_count(img) > 0)
        gr_image_remove_broker(img, gr_image_broker_at(img, gr_image_broker_count(img) - 1)->node_id);
    gr_image_set_controller(img, -1);
    img->controller_epoch = 0;
    feed->pend_count = feed->pend_live = 0;
    feed->pend_sorted = true;
    feed->in_snapshot = true;
    img->loading = true;
}

void gr_feed_commit(struct gr_feed *feed, int64_t revision)
{
    feed->in_snapshot = false;
    feed->img->loading = false;
    if (feed->pend_count > feed->pend_live) pend_squeeze(feed);
    if (revision > feed->img->revision) feed->img->revision = revision;
    gr_image_changed(feed->img);
}
