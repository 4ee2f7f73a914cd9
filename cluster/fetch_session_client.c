/*
 * fetch_session_client.c: the client side of a KIP-227 fetch session (cluster/fetch_session_client.h). The
 * session's partitions are an array in the order they were added, with an open-addressing index (slot =
 * position + 1, 0 empty) keyed by (topic id or name, partition) by the session's mode; both are rebuilt at
 * every gr_fsc_build from the partitions added for that request (a few microseconds for 1,000 partitions,
 * against the hundreds the leader spends on the fetch). Topic names are owned by the session: a partition
 * kept from one request to the next keeps its copy, a new one is copied, a forgotten one's copy is lent to
 * the plan until the next gr_fsc_begin. gr_fsc_build allocates everything it needs before it changes
 * anything, so an -ENOMEM leaves the session as it was.
 */
#include "cluster/fetch_session_client.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"

struct ent {
    struct gr_fsc_part p; /* p.topic: `name` once in the session; the caller's while being added */
    char *name;           /* owned copy of the topic name, NULL while not made yet or handed on */
    int32_t link;         /* building: the matching session entry of an added one / the added entry that
                             took a session entry's name (-1 none) */
    uint32_t seen;        /* answer checks: the generation that last named it */
};

struct gr_fsc {
    int32_t session_id, epoch; /* the next request's metadata */
    bool uses_ids;             /* the session's partitions are keyed by topic id */
    bool built;                /* a plan is out, waiting for gr_fsc_response or gr_fsc_failed */
    struct ent *sess;          /* the session's partitions */
    int32_t n, cap;
    int32_t *idx; /* index over sess: position + 1, 0 empty; idx_cap a power of two >= 2 n */
    uint32_t idx_cap;
    struct ent *next; /* the partitions added for the request being built */
    int32_t next_n, next_cap;
    int32_t *send; /* the plan's arrays */
    int32_t send_cap;
    struct gr_fsc_forgotten *forg;
    int32_t forg_n, forg_cap;
    uint32_t gen;
    struct gr_fsc_stats stats;
};

static const uint8_t zero_id[16];

/* ---- keys ---- */

static uint32_t key_hash(const struct gr_fsc_part *p, bool by_id)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    if (by_id) {
        for (int i = 0; i < 16; i++)
            h = (h ^ p->topic_id[i]) * 16777619u;
    } else {
        for (const char *c = p->topic; *c; c++)
            h = (h ^ (uint8_t)*c) * 16777619u;
    }
    h ^= (uint32_t)p->partition * 0x9E3779B1u;
    return h ^ (h >> 15);
}

static bool key_eq(const struct gr_fsc_part *a, const struct gr_fsc_part *b, bool by_id)
{
    if (a->partition != b->partition) return false;
    return by_id ? memcmp(a->topic_id, b->topic_id, 16) == 0 : strcmp(a->topic, b->topic) == 0;
}

/* Kafka's PartitionData.equals: every field a leader's session keeps. */
static bool part_eq(const struct gr_fsc_part *a, const struct gr_fsc_part *b)
{
    return !memcmp(a->topic_id, b->topic_id, 16) && a->fetch_offset == b->fetch_offset &&
           a->log_start_offset == b->log_start_offset && a->partition_max_bytes == b->partition_max_bytes &&
           a->current_leader_epoch == b->current_leader_epoch &&
           a->last_fetched_epoch == b->last_fetched_epoch;
}

/* The session entry keyed like `p` (in the session's mode), or -1. */
static int32_t sess_find(const struct gr_fsc *s, const struct gr_fsc_part *p)
{
    if (!s->idx_cap) return -1;
    uint32_t mask = s->idx_cap - 1;
    for (uint32_t i = key_hash(p, s->uses_ids) & mask;; i = (i + 1) & mask) {
        int32_t k = s->idx[i];
        if (k == 0) return -1;
        if (key_eq(&s->sess[k - 1].p, p, s->uses_ids)) return k - 1;
    }
}

/* Indexes `ents[0..n)` into `idx` (idx_cap slots, zeroed here) by mode `by_id`. */
static void index_fill(int32_t *idx, uint32_t idx_cap, const struct ent *ents, int32_t n, bool by_id)
{
    memset(idx, 0, sizeof *idx * idx_cap);
    uint32_t mask = idx_cap - 1;
    for (int32_t k = 0; k < n; k++) {
        uint32_t i = key_hash(&ents[k].p, by_id) & mask;
        while (idx[i])
            i = (i + 1) & mask;
        idx[i] = k + 1;
    }
}

/* ---- life ---- */

struct gr_fsc *gr_fsc_new(void)
{
    return calloc(1, sizeof(struct gr_fsc)); /* INITIAL: session 0, epoch 0 */
}

static void forgotten_clear(struct gr_fsc *s)
{
    for (int32_t i = 0; i < s->forg_n; i++)
        free((char *)s->forg[i].topic);
    s->forg_n = 0;
}

void gr_fsc_free(struct gr_fsc *s)
{
    if (!s) return;
    forgotten_clear(s);
    for (int32_t i = 0; i < s->n; i++)
        free(s->sess[i].name);
    free(s->sess);
    free(s->next);
    free(s->idx);
    free(s->send);
    free(s->forg);
    free(s);
}

void gr_fsc_begin(struct gr_fsc *s)
{
    forgotten_clear(s);
    s->next_n = 0;
}

int gr_fsc_add(struct gr_fsc *s, const struct gr_fsc_part *p)
{
    if (!p || !p->topic || !*p->topic || p->partition < 0 || s->next_n >= GR_FSC_PARTITIONS_MAX)
        return -EINVAL;
    if (s->next_n == s->next_cap) {
        int32_t cap = s->next_cap ? s->next_cap * 2 : 64;
        struct ent *e = realloc(s->next, sizeof *e * (size_t)cap);
        if (!e) return -ENOMEM;
        s->next = e;
        s->next_cap = cap;
    }
    s->next[s->next_n++] = (struct ent){.p = *p, .name = NULL, .link = -1};
    return 0;
}

/* ---- building (FetchSessionHandler.Builder.build) ---- */

/* Grows `*arr` (elements of `size` bytes) to hold `need`. 0 or -ENOMEM. */
static int grow(void **arr, int32_t *cap, int32_t need, size_t size)
{
    if (need <= *cap) return 0;
    int32_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *a = realloc(*arr, size * (size_t)c);
    if (!a) return -ENOMEM;
    *arr = a;
    *cap = c;
    return 0;
}

/* Frees the names copied by a build that ran out of memory (those of added partitions). */
static void next_unname(struct gr_fsc *s)
{
    for (int32_t i = 0; i < s->next_n; i++)
        if (s->next[i].link < 0) {
            free(s->next[i].name);
            s->next[i].name = NULL;
        }
}

/* Links each partition added to its session entry (when the mode is the session's) and copies the names of
   the new ones. 0 or -ENOMEM (nothing changed). */
static int build_prepare(struct gr_fsc *s, bool same_mode, bool same_keys)
{
    if (same_keys) { /* the steady state: the same partitions in the same order, no lookup */
        for (int32_t i = 0; i < s->next_n; i++)
            s->next[i].link = s->sess[i].link = i;
        return 0;
    }
    for (int32_t j = 0; j < s->n; j++)
        s->sess[j].link = -1;
    for (int32_t i = 0; i < s->next_n; i++) {
        struct ent *e = &s->next[i];
        int32_t j = same_mode ? sess_find(s, &e->p) : -1;
        if (j >= 0 && s->sess[j].link < 0) { /* a partition added twice takes a copy of its own */
            e->link = j;
            s->sess[j].link = i;
            continue;
        }
        e->link = -1;
        if (!(e->name = strdup(e->p.topic))) {
            next_unname(s);
            return -ENOMEM;
        }
    }
    return 0;
}

int gr_fsc_build(struct gr_fsc *s, bool ids_served, struct gr_fsc_plan *out)
{
    bool ids = ids_served;
    for (int32_t i = 0; i < s->next_n && ids; i++)
        if (!memcmp(s->next[i].p.topic_id, zero_id, 16)) ids = false;
    bool full = s->epoch <= 0;
    bool same_mode = ids == s->uses_ids;
    if (!full && !same_mode)
        full = true; /* (id, 0): a session by names cannot go on by ids, nor the reverse */
    /* the same keys in the same order as the session's: positions match and the index stays valid */
    bool same_keys = same_mode && s->next_n == s->n && s->idx;
    for (int32_t i = 0; i < s->next_n && same_keys; i++)
        same_keys = key_eq(&s->next[i].p, &s->sess[i].p, ids);
    uint32_t idx_cap = 16;
    while (idx_cap < 2u * (uint32_t)s->next_n)
        idx_cap *= 2;
    int32_t *idx = same_keys ? NULL : malloc(sizeof *idx * idx_cap);
    if ((!same_keys && !idx) || grow((void **)&s->send, &s->send_cap, s->next_n, sizeof *s->send) < 0 ||
        grow((void **)&s->forg, &s->forg_cap, full ? 0 : s->n, sizeof *s->forg) < 0 ||
        build_prepare(s, same_mode, same_keys) < 0) {
        free(idx);
        return -ENOMEM;
    }
    /* from here nothing fails */
    int32_t nsend = 0;
    for (int32_t i = 0; i < s->next_n; i++) {
        struct ent *e = &s->next[i];
        if (e->link >= 0) {
            struct ent *old = &s->sess[e->link];
            e->name = old->name;
            old->name = NULL;
            if (full || !part_eq(&old->p, &e->p)) s->send[nsend++] = i; /* altered */
        } else {
            s->send[nsend++] = i; /* added (or every partition of a full fetch) */
        }
        e->p.topic = e->name;
    }
    for (int32_t j = 0; j < s->n; j++) {
        struct ent *old = &s->sess[j];
        if (!old->name) continue; /* kept */
        if (full) {
            free(old->name);
            continue;
        }
        struct gr_fsc_forgotten *fg = &s->forg[s->forg_n++]; /* removed: the plan lends the name */
        fg->topic = old->name;
        memcpy(fg->topic_id, old->p.topic_id, 16);
        fg->partition = old->p.partition;
        old->name = NULL;
    }
    struct ent *t = s->sess; /* the added partitions become the session */
    int32_t tcap = s->cap;
    s->sess = s->next;
    s->cap = s->next_cap;
    s->n = s->next_n;
    s->next = t;
    s->next_cap = tcap;
    s->next_n = 0;
    s->uses_ids = ids;
    if (!same_keys) {
        free(s->idx);
        s->idx = idx;
        s->idx_cap = idx_cap;
        index_fill(s->idx, s->idx_cap, s->sess, s->n, ids);
    }
    if (full) s->epoch = 0;
    s->built = true;
    if (full)
        s->stats.full++;
    else
        s->stats.incremental++;
    *out = (struct gr_fsc_plan){.session_id = s->session_id,
                                .session_epoch = s->epoch,
                                .full = full,
                                .topic_ids = ids,
                                .send = s->send,
                                .send_count = nsend,
                                .forgotten = s->forg,
                                .forgotten_count = s->forg_n};
    return 0;
}

/* ---- answers (FetchSessionHandler.handleResponse, FetchMetadata) ---- */

int32_t gr_fsc_next_epoch(int32_t epoch)
{
    return epoch < 0 ? -1 : epoch == INT32_MAX ? 1 : epoch + 1;
}

/* The next request is full: INITIAL (0, 0) when `initial`, else closing the session and asking anew. */
static void reset(struct gr_fsc *s, bool initial)
{
    if (initial) s->session_id = 0;
    s->epoch = 0;
    s->stats.resets++;
}

/* Counts the answer's partitions outside the session (*extra) and the session's it names (returned). */
static int32_t answer_check(struct gr_fsc *s, const struct gr_fetch_response *r, int16_t version,
                            int32_t *extra)
{
    bool by_id = version >= 13;
    if (++s->gen == 0) s->gen = 1; /* 0 is what a new entry holds */
    uint32_t gen = s->gen;
    int32_t seen = 0, pos = 0; /* pos: where the next answered partition probably is (answers follow the
                                  request's order) */
    *extra = 0;
    for (int32_t t = 0; t < r->responses.count; t++) {
        const struct gr_fetch_response_fetchable_topic_response *tr = &r->responses.items[t];
        char name[GR_TOPIC_NAME_BYTES_MAX + 1] = "";
        if (!by_id) {
            if (tr->topic.len < 0 || tr->topic.len >= (int32_t)sizeof name) {
                *extra += tr->partitions.count > 0 ? tr->partitions.count : 0;
                continue;
            }
            memcpy(name, tr->topic.ptr, (size_t)tr->topic.len);
            name[tr->topic.len] = 0;
        }
        struct gr_fsc_part key = {.topic = name};
        memcpy(key.topic_id, tr->topic_id.b, 16);
        for (int32_t i = 0; i < tr->partitions.count; i++) {
            key.partition = tr->partitions.items[i].partition_index;
            int32_t j = by_id != s->uses_ids                                 ? -1
                        : pos < s->n && key_eq(&s->sess[pos].p, &key, by_id) ? pos
                                                                             : sess_find(s, &key);
            pos = j + 1;
            if (j < 0) {
                (*extra)++;
            } else if (s->sess[j].seen != gen) {
                s->sess[j].seen = gen;
                seen++;
            }
        }
    }
    return seen;
}

bool gr_fsc_response(struct gr_fsc *s, const struct gr_fetch_response *r, int16_t version)
{
    if (!s->built) return false; /* nothing asked: the caller's mistake, nothing taken */
    s->built = false;
    if (r->error_code != GR_ERR_NONE) {
        reset(s, r->error_code == GR_ERR_FETCH_SESSION_ID_NOT_FOUND);
        return false;
    }
    int32_t extra = 0;
    int32_t seen = answer_check(s, r, version, &extra);
    if (s->epoch <= 0) {                                          /* a full fetch */
        if (r->responses.count == 0 && r->throttle_time_ms > 0) { /* KIP-219: throttled, nothing to take */
            s->session_id = 0;
            s->epoch = 0;
            return false;
        }
        if (extra || seen != s->n) {
            reset(s, true);
            return false;
        }
        s->session_id = r->session_id;
        s->epoch = r->session_id == 0 ? 0 : 1; /* 0: no session made, ask again (INITIAL) */
        return true;
    }
    if (extra) {
        reset(s, false);
        return false;
    }
    if (r->session_id == 0) { /* the leader closed the session */
        s->epoch = 0;
        s->session_id = 0;
        return true;
    }
    s->epoch = gr_fsc_next_epoch(s->epoch);
    return true;
}

void gr_fsc_failed(struct gr_fsc *s)
{
    if (!s->built) return;
    s->built = false;
    reset(s, false);
}

int32_t gr_fsc_session_id(const struct gr_fsc *s)
{
    return s->session_id;
}

int32_t gr_fsc_epoch(const struct gr_fsc *s)
{
    return s->epoch;
}

int32_t gr_fsc_partitions(const struct gr_fsc *s)
{
    return s->n;
}

const struct gr_fsc_stats *gr_fsc_stats(const struct gr_fsc *s)
{
    return &s->stats;
}
