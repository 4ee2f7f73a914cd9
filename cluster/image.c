/*
 * image.c: the metadata image (cluster/image.h). Brokers are a sorted array (binary search by node id);
 * topics are a name-sorted array of pointers plus two chained hash tables (by name: FNV-1a of the bytes; by
 * id: the id's first four bytes, random in a v4 UUID, mixed), grown to keep at most one topic per bucket on
 * average. Each mutator checks every bound before it changes anything, so an error leaves the image as it
 * was. Read next: cluster/local.c (the single-node source), server/route.c.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"

static uint32_t hash_name(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint32_t hash_id(const uint8_t id[16])
{
    uint32_t h;
    memcpy(&h, id + 8, sizeof h); /* random bits of a v4 UUID (bytes 0-5 too) */
    uint32_t g;
    memcpy(&g, id, sizeof g);
    return (h ^ g) * 2654435761u;
}

struct gr_image *gr_image_new(int32_t node_id)
{
    struct gr_image *img = calloc(1, sizeof *img);
    if (!img) return NULL;
    img->node_id = node_id;
    img->controller_id = -1;
    img->features_epoch = -1;
    img->bucket_count = 64;
    img->by_name = calloc(img->bucket_count, sizeof *img->by_name);
    img->by_id = calloc(img->bucket_count, sizeof *img->by_id);
    if (!img->by_name || !img->by_id) {
        gr_image_free(img);
        return NULL;
    }
    return img;
}

static void partition_free(struct gr_image_partition *p)
{
    if (p->nodes && p->nodes != p->inline_nodes) free(p->nodes);
    p->nodes = p->inline_nodes;
}

static void configs_free(struct gr_image_config *cfgs, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        free(cfgs[i].name);
        free(cfgs[i].value);
    }
    free(cfgs);
}

static void topic_free(struct gr_image_topic *t)
{
    for (int32_t p = 0; p < t->partition_count; p++)
        partition_free(&t->parts[p]);
    free(t->parts);
    configs_free(t->configs, t->config_count);
    free(t);
}

void gr_image_free(struct gr_image *img)
{
    if (!img) return;
    for (int32_t i = 0; i < img->topic_count; i++)
        topic_free(img->topics[i]);
    free(img->topics);
    free(img->by_name);
    free(img->by_id);
    free(img->brokers);
    free(img);
}

int gr_image_set_cluster_id(struct gr_image *img, const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > GR_CLUSTER_ID_BYTES_MAX) return -EINVAL;
    memcpy(img->cluster_id, id, n + 1);
    return 0;
}

void gr_image_set_controller(struct gr_image *img, int32_t node_id)
{
    img->controller_id = node_id < 0 ? -1 : node_id;
}

/* ---- brokers ---- */

/* Index of `node_id` in the sorted array, or -(insertion point) - 1. */
static int32_t broker_search(const struct gr_image *img, int32_t node_id)
{
    int32_t lo = 0, hi = img->broker_count;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int32_t id = img->brokers[mid].node_id;
        if (id == node_id) return mid;
        if (id < node_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

static bool str_bounded(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

static bool broker_valid(const struct gr_image_broker *br)
{
    if (br->node_id < 0 || br->listener_count < 0 || br->listener_count > GR_LISTENERS_MAX) return false;
    if (br->has_rack && !str_bounded(br->rack, sizeof br->rack)) return false;
    for (int i = 0; i < br->listener_count; i++) {
        const struct gr_image_listener *l = &br->listeners[i];
        if (!str_bounded(l->name, sizeof l->name) || !str_bounded(l->host, sizeof l->host)) return false;
        if (l->name[0] == '\0' || l->port < 0 || l->port > 65535) return false;
        for (int j = 0; j < i; j++)
            if (strcmp(br->listeners[j].name, l->name) == 0) return false;
    }
    return true;
}

int gr_image_set_broker(struct gr_image *img, const struct gr_image_broker *br)
{
    if (!broker_valid(br)) return -EINVAL;
    int32_t i = broker_search(img, br->node_id);
    if (i >= 0) {
        img->brokers[i] = *br;
        if (!br->has_rack) img->brokers[i].rack[0] = '\0';
        return 0;
    }
    if (img->broker_count >= GR_IMAGE_BROKERS_MAX) return -ENOSPC;
    if (img->broker_count == img->broker_cap) {
        int32_t ncap = img->broker_cap ? img->broker_cap * 2 : 4;
        struct gr_image_broker *n = realloc(img->brokers, sizeof *n * (size_t)ncap);
        if (!n) return -ENOMEM;
        img->brokers = n;
        img->broker_cap = ncap;
    }
    i = -i - 1;
    memmove(img->brokers + i + 1, img->brokers + i, sizeof *img->brokers * (size_t)(img->broker_count - i));
    img->brokers[i] = *br;
    if (!br->has_rack) img->brokers[i].rack[0] = '\0';
    img->broker_count++;
    return 0;
}

bool gr_image_remove_broker(struct gr_image *img, int32_t node_id)
{
    int32_t i = broker_search(img, node_id);
    if (i < 0) return false;
    memmove(img->brokers + i, img->brokers + i + 1,
            sizeof *img->brokers * (size_t)(img->broker_count - i - 1));
    img->broker_count--;
    return true;
}

const struct gr_image_broker *gr_image_broker(const struct gr_image *img, int32_t node_id)
{
    int32_t i = broker_search(img, node_id);
    return i >= 0 ? &img->brokers[i] : NULL;
}

int32_t gr_image_broker_count(const struct gr_image *img)
{
    return img->broker_count;
}

const struct gr_image_broker *gr_image_broker_at(const struct gr_image *img, int32_t i)
{
    assert(i >= 0 && i < img->broker_count);
    return &img->brokers[i];
}

int32_t gr_image_usable_broker_count(const struct gr_image *img)
{
    int32_t n = 0;
    for (int32_t i = 0; i < img->broker_count; i++)
        n += !img->brokers[i].fenced && !img->brokers[i].shutting_down;
    return n;
}

const struct gr_image_listener *gr_image_broker_listener(const struct gr_image_broker *br, const char *name,
                                                         size_t len)
{
    for (int i = 0; i < br->listener_count; i++) {
        const struct gr_image_listener *l = &br->listeners[i];
        if (strlen(l->name) == len && memcmp(l->name, name, len) == 0) return l;
    }
    return NULL;
}

/* ---- topics ---- */

/* Index of `name` in the name-sorted array, or -(insertion point) - 1. */
static int32_t topic_search(const struct gr_image *img, const char *name, size_t len)
{
    int32_t lo = 0, hi = img->topic_count;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const struct gr_image_topic *t = img->topics[mid];
        size_t tl = (size_t)t->name_len;
        int c = memcmp(t->name, name, tl < len ? tl : len);
        if (c == 0) c = tl < len ? -1 : tl > len ? 1 : 0;
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

struct gr_image_topic *gr_image_topic_find(const struct gr_image *img, const char *name, size_t len)
{
    if (len > GR_TOPIC_NAME_BYTES_MAX) return NULL;
    uint32_t h = hash_name(name, len);
    for (struct gr_image_topic *t = img->by_name[h & (img->bucket_count - 1)]; t; t = t->next_by_name)
        if (t->name_hash == h && (size_t)t->name_len == len && memcmp(t->name, name, len) == 0) return t;
    return NULL;
}

struct gr_image_topic *gr_image_topic_find_id(const struct gr_image *img, const uint8_t id[16])
{
    uint32_t h = hash_id(id);
    for (struct gr_image_topic *t = img->by_id[h & (img->bucket_count - 1)]; t; t = t->next_by_id)
        if (t->id_hash == h && memcmp(t->id, id, 16) == 0) return t;
    return NULL;
}

int32_t gr_image_topic_count(const struct gr_image *img)
{
    return img->topic_count;
}

struct gr_image_topic *gr_image_topic_at(const struct gr_image *img, int32_t i)
{
    assert(i >= 0 && i < img->topic_count);
    return img->topics[i];
}

int64_t gr_image_partition_total(const struct gr_image *img)
{
    return img->partition_total;
}

static void chains_link(struct gr_image *img, struct gr_image_topic *t)
{
    uint32_t m = img->bucket_count - 1;
    t->next_by_name = img->by_name[t->name_hash & m];
    img->by_name[t->name_hash & m] = t;
    t->next_by_id = img->by_id[t->id_hash & m];
    img->by_id[t->id_hash & m] = t;
}

static void chains_unlink(struct gr_image *img, struct gr_image_topic *t)
{
    uint32_t m = img->bucket_count - 1;
    struct gr_image_topic **pp = &img->by_name[t->name_hash & m];
    while (*pp != t)
        pp = &(*pp)->next_by_name;
    *pp = t->next_by_name;
    pp = &img->by_id[t->id_hash & m];
    while (*pp != t)
        pp = &(*pp)->next_by_id;
    *pp = t->next_by_id;
}

/* Makes room for one more topic: the sorted array and, past one topic per bucket, twice the buckets.
   Returns 0 or -ENOMEM (nothing changed). */
static int topics_reserve(struct gr_image *img)
{
    if (img->topic_count == img->topic_cap) {
        int32_t ncap = img->topic_cap ? img->topic_cap * 2 : 16;
        struct gr_image_topic **n = realloc(img->topics, sizeof *n * (size_t)ncap);
        if (!n) return -ENOMEM;
        img->topics = n;
        img->topic_cap = ncap;
    }
    if ((uint32_t)img->topic_count + 1 <= img->bucket_count) return 0;
    uint32_t nb = img->bucket_count * 2;
    struct gr_image_topic **bn = calloc(nb, sizeof *bn), **bi = calloc(nb, sizeof *bi);
    if (!bn || !bi) {
        free(bn);
        free(bi);
        return -ENOMEM;
    }
    free(img->by_name);
    free(img->by_id);
    img->by_name = bn;
    img->by_id = bi;
    img->bucket_count = nb;
    for (int32_t i = 0; i < img->topic_count; i++)
        chains_link(img, img->topics[i]);
    return 0;
}

static void topic_unpublish(struct gr_image *img, struct gr_image_topic *t)
{
    chains_unlink(img, t);
    int32_t i = topic_search(img, t->name, (size_t)t->name_len);
    assert(i >= 0 && img->topics[i] == t);
    memmove(img->topics + i, img->topics + i + 1, sizeof *img->topics * (size_t)(img->topic_count - i - 1));
    img->topic_count--;
    img->partition_total -= t->partition_count;
}

bool gr_image_remove_topic(struct gr_image *img, const uint8_t id[16])
{
    struct gr_image_topic *t = gr_image_topic_find_id(img, id);
    if (!t) return false;
    topic_unpublish(img, t);
    topic_free(t);
    return true;
}

static void partition_init(struct gr_image_partition *p)
{
    memset(p, 0, sizeof *p);
    p->leader = -1;
    p->leader_epoch = -1;
    p->nodes = p->inline_nodes;
}

/* Grows `t` to `partitions` (new ones: no leader). Returns 0 or -ENOMEM (nothing changed). */
static int topic_grow(struct gr_image_topic *t, int32_t partitions)
{
    struct gr_image_partition *n = malloc(sizeof *n * (size_t)partitions);
    if (!n) return -ENOMEM;
    for (int32_t p = 0; p < partitions; p++) {
        if (p < t->partition_count) {
            n[p] = t->parts[p];
            if (t->parts[p].nodes == t->parts[p].inline_nodes) n[p].nodes = n[p].inline_nodes;
        } else {
            partition_init(&n[p]);
        }
    }
    free(t->parts);
    t->parts = n;
    t->partition_count = partitions;
    return 0;
}

static bool id_zero(const uint8_t id[16])
{
    static const uint8_t zero[16];
    return memcmp(id, zero, 16) == 0;
}

int gr_image_put_topic(struct gr_image *img, const char *name, size_t name_len, const uint8_t id[16],
                       bool internal, int32_t partitions, struct gr_topic *local, struct gr_image_topic **out)
{
    if (name_len == 0 || name_len > GR_TOPIC_NAME_BYTES_MAX || id_zero(id)) return -EINVAL;
    if (partitions < 1 || partitions > GR_PARTITIONS_PER_TOPIC_MAX) return -EINVAL;
    struct gr_image_topic *t = gr_image_topic_find_id(img, id);
    struct gr_image_topic *same_name = gr_image_topic_find(img, name, name_len);
    if (t) { /* an update: same name, never fewer partitions */
        if (same_name != t || partitions < t->partition_count) return -EINVAL;
        if (img->partition_total - t->partition_count + partitions > GR_IMAGE_PARTITIONS_MAX) return -ENOSPC;
        if (partitions > t->partition_count) {
            int32_t before = t->partition_count;
            if (topic_grow(t, partitions) < 0) return -ENOMEM;
            img->partition_total += partitions - before;
        }
        t->internal = internal;
        t->local = local;
        if (out) *out = t;
        return 0;
    }
    int64_t freed = same_name ? same_name->partition_count : 0;
    if (!same_name && img->topic_count >= GR_IMAGE_TOPICS_MAX) return -ENOSPC;
    if (img->partition_total - freed + partitions > GR_IMAGE_PARTITIONS_MAX) return -ENOSPC;
    t = calloc(1, sizeof *t);
    if (!t || topics_reserve(img) < 0 || topic_grow(t, partitions) < 0) {
        free(t ? t->parts : NULL);
        free(t);
        return -ENOMEM;
    }
    if (same_name) { /* deleted and re-created under a new id: the old one goes */
        topic_unpublish(img, same_name);
        topic_free(same_name);
    }
    memcpy(t->name, name, name_len);
    t->name[name_len] = '\0';
    t->name_len = (int32_t)name_len;
    memcpy(t->id, id, 16);
    t->internal = internal;
    t->local = local;
    t->name_hash = hash_name(name, name_len);
    t->id_hash = hash_id(id);
    int32_t i = -topic_search(img, name, name_len) - 1;
    memmove(img->topics + i + 1, img->topics + i, sizeof *img->topics * (size_t)(img->topic_count - i));
    img->topics[i] = t;
    img->topic_count++;
    img->partition_total += partitions;
    chains_link(img, t);
    if (out) *out = t;
    return 0;
}

static bool nodes_valid(const int32_t *nodes, int32_t count)
{
    if (count < 0 || count > GR_IMAGE_REPLICAS_MAX || (count > 0 && !nodes)) return false;
    for (int32_t i = 0; i < count; i++)
        if (nodes[i] < 0) return false;
    return true;
}

int gr_image_set_partition(struct gr_image *img, struct gr_image_topic *t, int32_t partition,
                           const struct gr_image_partition_state *st)
{
    (void)img;
    if (partition < 0 || partition >= t->partition_count || st->leader < -1) return -EINVAL;
    if (!nodes_valid(st->replicas, st->replica_count) || !nodes_valid(st->isr, st->isr_count) ||
        !nodes_valid(st->offline, st->offline_count) || !nodes_valid(st->adding, st->adding_count) ||
        !nodes_valid(st->removing, st->removing_count))
        return -EINVAL;
    struct gr_image_partition *p = &t->parts[partition];
    const int32_t *lists[5] = {st->replicas, st->isr, st->offline, st->adding, st->removing};
    int32_t counts[5] = {st->replica_count, st->isr_count, st->offline_count, st->adding_count,
                         st->removing_count};
    size_t n = 0;
    for (int i = 0; i < 5; i++)
        n += (size_t)counts[i];
    int32_t *nodes = p->inline_nodes;
    if (n > sizeof p->inline_nodes / sizeof p->inline_nodes[0] && !(nodes = malloc(sizeof *nodes * n)))
        return -ENOMEM;
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        if (counts[i]) memmove(nodes + at, lists[i], sizeof *nodes * (size_t)counts[i]);
        at += (size_t)counts[i];
    }
    if (p->nodes != p->inline_nodes) free(p->nodes);
    p->nodes = nodes;
    p->leader = st->leader;
    p->leader_epoch = st->leader_epoch;
    p->partition_epoch = st->partition_epoch;
    p->replica_count = (int16_t)st->replica_count;
    p->isr_count = (int16_t)st->isr_count;
    p->offline_count = (int16_t)st->offline_count;
    p->adding_count = (int16_t)st->adding_count;
    p->removing_count = (int16_t)st->removing_count;
    return 0;
}

int gr_image_observe(struct gr_image *img, void (*fn)(void *ctx, struct gr_image *img), void *ctx)
{
    if (img->observer_count == GR_IMAGE_OBSERVERS_MAX) return -ENOSPC;
    img->observers[img->observer_count].fn = fn;
    img->observers[img->observer_count].ctx = ctx;
    img->observer_count++;
    return 0;
}

void gr_image_unobserve(struct gr_image *img, void (*fn)(void *ctx, struct gr_image *img), void *ctx)
{
    for (int i = 0; i < img->observer_count; i++) {
        if (img->observers[i].fn != fn || img->observers[i].ctx != ctx) continue;
        memmove(&img->observers[i], &img->observers[i + 1],
                sizeof img->observers[0] * (size_t)(img->observer_count - i - 1));
        img->observer_count--;
        return;
    }
}

void gr_image_changed(struct gr_image *img)
{
    /* a copy: an observer may unobserve itself (or another) while it runs */
    int n = img->observer_count;
    __typeof__(img->observers[0]) obs[GR_IMAGE_OBSERVERS_MAX];
    memcpy(obs, img->observers, sizeof obs[0] * (size_t)n);
    for (int i = 0; i < n; i++)
        obs[i].fn(obs[i].ctx, img);
}

static int config_cmp(const void *a, const void *b)
{
    return strcmp(((const struct gr_image_config *)a)->name, ((const struct gr_image_config *)b)->name);
}

int gr_image_set_topic_configs(struct gr_image *img, struct gr_image_topic *t, const char *const *names,
                               const char *const *values, int32_t count)
{
    (void)img;
    if (count < 0 || count > GR_CLUSTER_TOPIC_CONFIGS_MAX || (count > 0 && (!names || !values)))
        return -EINVAL;
    for (int32_t i = 0; i < count; i++) {
        if (!names[i] || !values[i] || !names[i][0]) return -EINVAL;
        if (strnlen(names[i], GR_CLUSTER_CONFIG_NAME_BYTES_MAX + 1) > GR_CLUSTER_CONFIG_NAME_BYTES_MAX ||
            strnlen(values[i], GR_CLUSTER_CONFIG_VALUE_BYTES_MAX + 1) > GR_CLUSTER_CONFIG_VALUE_BYTES_MAX)
            return -EINVAL;
    }
    struct gr_image_config *cfgs = count ? calloc((size_t)count, sizeof *cfgs) : NULL;
    if (count && !cfgs) return -ENOMEM;
    for (int32_t i = 0; i < count; i++) {
        cfgs[i] = (struct gr_image_config){strdup(names[i]), strdup(values[i])};
        if (!cfgs[i].name || !cfgs[i].value) {
            configs_free(cfgs, i + 1);
            return -ENOMEM;
        }
    }
    if (count) qsort(cfgs, (size_t)count, sizeof *cfgs, config_cmp);
    for (int32_t i = 1; i < count; i++)
        if (strcmp(cfgs[i - 1].name, cfgs[i].name) == 0) {
            configs_free(cfgs, count);
            return -EINVAL;
        }
    configs_free(t->configs, t->config_count);
    t->configs = cfgs;
    t->config_count = count;
    return 0;
}

const char *gr_image_topic_config(const struct gr_image_topic *t, const char *name)
{
    struct gr_image_config key = {(char *)name, NULL};
    const struct gr_image_config *c =
        t->config_count ? bsearch(&key, t->configs, (size_t)t->config_count, sizeof key, config_cmp) : NULL;
    return c ? c->value : NULL;
}

int32_t gr_image_topic_min_isr(const struct gr_image_topic *t, int32_t broker_default)
{
    const char *v = gr_image_topic_config(t, "min.insync.replicas");
    if (v) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (!errno && end != v && !*end && n >= 1 && n <= INT32_MAX) return (int32_t)n;
    }
    return broker_default;
}
