/*
 * placement.c: Kafka's StripedReplicaPlacer (placement.h), step for step so that the same random draws give
 * the same placements: a rack list built in the order Kafka's HashMap iterates its racks (the order decides
 * which random draw each rack's lists get), per-list iteration epochs, the shuffle after a full round. One
 * deviation, a safety net: Kafka's inner loop could spin forever if a rack's list ran dry within an epoch
 * after a shuffle reset the epochs; here a pass over every rack that finds nothing ends the placement with
 * -EAGAIN (never seen in the tests; a broker set and seed that reach it are a bug report).
 */
#include "cluster/placement.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kafka's BrokerList: sorted ids, a start offset, how many were handed out in the current epoch. */
struct blist {
    int32_t *ids;
    int n;
    int index, offset, epoch;
};

struct rack {
    const char *name; /* NULL: no rack */
    struct blist fenced, unfenced;
    int order;       /* first appearance among the brokers: insertion order into Kafka's HashMap */
    uint32_t bucket; /* its HashMap bucket at the map's final capacity */
};

struct rack_list {
    struct gr_placement_rng *rng;
    struct rack *racks; /* in first-appearance order */
    int rack_count;
    struct rack **names;   /* rackNames: sorted, then shuffled */
    struct rack **by_hash; /* HashMap iteration order */
    int total, unfenced;
    int epoch, offset;
};

/* MockRandom.next(bits): a 64-bit LCG, the top `bits` bits. */
static int32_t rng_next(struct gr_placement_rng *rng, int bits)
{
    rng->state = rng->state * 2862933555777941757ULL + 3037000493ULL;
    return (int32_t)(rng->state >> (64 - bits));
}

int32_t gr_placement_rng_next_int(struct gr_placement_rng *rng, int32_t bound)
{
    assert(bound > 0);
    int32_t r = rng_next(rng, 31), m = bound - 1;
    if ((bound & m) == 0) return (int32_t)(((int64_t)bound * r) >> 31);
    for (int32_t u = r; (int32_t)((uint32_t)u - (uint32_t)(r = u % bound) + (uint32_t)m) < 0;
         u = rng_next(rng, 31))
        ;
    return r;
}

/* Collections.shuffle(list, rnd) on a random-access list. */
static void shuffle_ids(struct gr_placement_rng *rng, int32_t *a, int n)
{
    for (int i = n; i > 1; i--) {
        int j = gr_placement_rng_next_int(rng, i);
        int32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static void shuffle_racks(struct gr_placement_rng *rng, struct rack **a, int n)
{
    for (int i = n; i > 1; i--) {
        int j = gr_placement_rng_next_int(rng, i);
        struct rack *t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static int cmp_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* OptionalStringComparator: no rack first, then by name (byte order: Java's String order for ASCII). */
static int cmp_rack_name(const void *a, const void *b)
{
    const struct rack *x = *(struct rack *const *)a, *y = *(struct rack *const *)b;
    if (!x->name || !y->name) return (x->name != NULL) - (y->name != NULL);
    return strcmp(x->name, y->name);
}

/* Java's HashMap bucket of an Optional<String> key at `cap` buckets: String.hashCode (over bytes: equal to
 * Java's for ASCII names), 0 for no rack, spread by h ^ (h >>> 16). */
static uint32_t rack_bucket(const char *name, uint32_t cap)
{
    uint32_t h = 0;
    for (const unsigned char *p = (const unsigned char *)name; p && *p; p++)
        h = 31 * h + *p;
    return (h ^ (h >> 16)) & (cap - 1);
}

/* HashMap iteration order: by bucket at the final capacity (16, doubled while size > 0.75 x capacity), then
 * insertion order within a bucket (resizes keep it). */
static int cmp_hash_order(const void *a, const void *b)
{
    const struct rack *x = *(struct rack *const *)a, *y = *(struct rack *const *)b;
    if (x->bucket != y->bucket) return x->bucket < y->bucket ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

static void blist_init(struct gr_placement_rng *rng, struct blist *l)
{
    if (!l->n) return;
    qsort(l->ids, (size_t)l->n, sizeof *l->ids, cmp_id);
    l->offset = gr_placement_rng_next_int(rng, l->n);
}

/* BrokerList.next(epoch): the next id of this epoch, -1 when the list is used up in it. */
static int32_t blist_next(struct blist *l, int epoch)
{
    if (!l->n) return -1;
    if (l->epoch != epoch) {
        l->epoch = epoch;
        l->index = 0;
        l->offset = (l->offset + 1) % l->n;
    }
    if (l->index >= l->n) return -1;
    return l->ids[(l->index++ + l->offset) % l->n];
}

/* Rack.next: unfenced first, then fenced. */
static int32_t rack_next(struct rack *r, int epoch)
{
    int32_t id = blist_next(&r->unfenced, epoch);
    return id >= 0 ? id : blist_next(&r->fenced, epoch);
}

static bool same_rack(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* RackList's constructor. `ids` holds broker_count slots, split among the racks' lists. */
static int rack_list_build(struct rack_list *rl, const struct gr_placement_broker *brokers, int broker_count,
                           int32_t *ids)
{
    for (int i = 0; i < broker_count; i++) {
        int k = 0;
        while (k < rl->rack_count && !same_rack(rl->racks[k].name, brokers[i].rack))
            k++;
        if (k == rl->rack_count)
            rl->racks[rl->rack_count++] = (struct rack){.name = brokers[i].rack, .order = k};
    }
    int at = 0;
    for (int k = 0; k < rl->rack_count; k++) { /* each rack's lists, in broker order as Kafka adds them */
        struct rack *r = &rl->racks[k];
        for (int pass = 0; pass < 2; pass++) {
            struct blist *l = pass ? &r->fenced : &r->unfenced;
            l->ids = ids + at;
            for (int i = 0; i < broker_count; i++)
                if (same_rack(brokers[i].rack, r->name) && brokers[i].fenced == (pass == 1)) {
                    l->ids[l->n++] = brokers[i].node_id;
                    at++;
                }
            if (!pass) rl->unfenced += l->n;
        }
    }
    rl->total = broker_count;
    uint32_t cap = 16;
    while ((uint32_t)rl->rack_count > cap * 3 / 4)
        cap *= 2;
    for (int k = 0; k < rl->rack_count; k++) {
        rl->racks[k].bucket = rack_bucket(rl->racks[k].name, cap);
        rl->by_hash[k] = rl->names[k] = &rl->racks[k];
    }
    qsort(rl->by_hash, (size_t)rl->rack_count, sizeof *rl->by_hash, cmp_hash_order);
    for (int k = 0; k < rl->rack_count; k++) {
        blist_init(rl->rng, &rl->by_hash[k]->fenced);
        blist_init(rl->rng, &rl->by_hash[k]->unfenced);
    }
    qsort(rl->names, (size_t)rl->rack_count, sizeof *rl->names, cmp_rack_name);
    rl->offset = rl->rack_count ? gr_placement_rng_next_int(rl->rng, rl->rack_count) : 0;
    return 0;
}

static void rack_list_shuffle(struct rack_list *rl)
{
    shuffle_racks(rl->rng, rl->names, rl->rack_count);
    for (int k = 0; k < rl->rack_count; k++) {
        shuffle_ids(rl->rng, rl->by_hash[k]->fenced.ids, rl->by_hash[k]->fenced.n);
        shuffle_ids(rl->rng, rl->by_hash[k]->unfenced.ids, rl->by_hash[k]->unfenced.n);
    }
}

/* RackList.place(rf) for one partition into out[rf]. 0 or -EAGAIN (see the opening comment). */
static int rack_list_place(struct rack_list *rl, int32_t rf, int32_t *out)
{
    if (rl->epoch == rl->unfenced && rl->unfenced > 1) {
        rack_list_shuffle(rl);
        rl->epoch = 0;
    }
    if (rl->offset == rl->rack_count) rl->offset = 0;
    int first = rl->offset;
    for (int tried = 0;; tried++) { /* the leader: the first rack from offset on with an unfenced broker */
        if (tried == rl->rack_count) return -EAGAIN;
        int32_t id = blist_next(&rl->names[first]->unfenced, rl->epoch);
        if (id >= 0) {
            out[0] = id;
            break;
        }
        if (++first == rl->rack_count) first = 0;
    }
    int at = rl->offset;
    for (int32_t replica = 1; replica < rf; replica++) {
        int32_t id = -1;
        for (int tried = 0; id < 0; tried++) {
            if (tried > 2 * rl->rack_count) return -EAGAIN;
            if (at == first)
                first = -1;
            else
                id = rack_next(rl->names[at], rl->epoch);
            if (++at == rl->rack_count) at = 0;
        }
        out[replica] = id;
    }
    rl->epoch++;
    rl->offset++;
    return 0;
}

int gr_placement_place(struct gr_placement_rng *rng, const struct gr_placement_broker *brokers,
                       int broker_count, int32_t partition_count, int32_t replication_factor,
                       int32_t *replicas, char *err, size_t err_cap)
{
    if (broker_count > GR_PLACEMENT_BROKERS_MAX || replication_factor > GR_CLUSTER_REPLICAS_MAX ||
        partition_count < 1 || partition_count > GR_PARTITIONS_PER_TOPIC_MAX)
        return -E2BIG;
    int unfenced = 0;
    for (int i = 0; i < broker_count; i++) {
        assert(brokers[i].node_id >= 0);
        for (int k = 0; k < i; k++)
            assert(brokers[k].node_id != brokers[i].node_id);
        unfenced += !brokers[i].fenced;
    }
    if (replication_factor <= 0) {
        snprintf(err, err_cap, "Invalid replication factor %d: the replication factor must be positive.",
                 (int)replication_factor);
        return -EINVAL;
    }
    if (unfenced == 0) {
        snprintf(err, err_cap, "All brokers are currently fenced.");
        return -EINVAL;
    }
    if (replication_factor > broker_count) {
        snprintf(
            err, err_cap,
            "The target replication factor of %d cannot be reached because only %d broker(s) are registered.",
            (int)replication_factor, broker_count);
        return -EINVAL;
    }
    struct rack_list rl = {.rng = rng};
    int32_t *ids = malloc((size_t)broker_count * sizeof *ids);
    rl.racks = calloc((size_t)broker_count, sizeof *rl.racks);
    rl.names = calloc((size_t)broker_count, sizeof *rl.names);
    rl.by_hash = calloc((size_t)broker_count, sizeof *rl.by_hash);
    int rc = !ids || !rl.racks || !rl.names || !rl.by_hash ? -ENOMEM : 0;
    if (!rc) rc = rack_list_build(&rl, brokers, broker_count, ids);
    for (int32_t p = 0; !rc && p < partition_count; p++)
        rc = rack_list_place(&rl, replication_factor, replicas + (size_t)p * (size_t)replication_factor);
    if (rc == -EAGAIN) snprintf(err, err_cap, "placement found no broker for a replica (a placer bug)");
    free(ids);
    free(rl.racks);
    free(rl.names);
    free(rl.by_hash);
    return rc;
}
