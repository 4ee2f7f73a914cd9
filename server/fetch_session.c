/*
 * fetch_session.c: the KIP-227 session cache (server/fetch_session.h). Sessions live in an array of at most
 * `slots` (linear lookups: slots are 1000 by default); each keeps its partitions sorted by (topic id or
 * name, partition) for binary search, so an answer's order is the session's sort order (clients do not
 * depend on it).
 */
#include "server/fetch_session.h"

#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"
#include "server/broker.h"

struct fpart {
    char *name; /* topic name (malloc'd), sessions by name (before v13); NULL with ids */
    int32_t name_len;
    uint8_t id[16]; /* topic id, sessions with ids (v13+) */
    int32_t partition;
    int64_t fetch_offset, log_start_offset;
    int32_t max_bytes, leader_epoch, last_fetched_epoch;
    int64_t hw, lso_local; /* the high watermark and log start offset last sent (-1: none yet) */
};

struct fsess {
    int32_t id, epoch; /* epoch: what the next incremental fetch must carry */
    bool privileged, uses_ids;
    bool ev_priv, ev_all; /* evictable by privileged / by all, as of the last touch (Kafka's touch) */
    int64_t created_ms, last_used_ms;
    struct fpart *parts;
    int32_t n, cap;
    int64_t bytes; /* its memory: partitions and names */
};

struct gr_fsess_cache {
    int32_t slots;
    int64_t eviction_ms;
    uint64_t rng;
    struct fsess **s;
    int32_t n;
    struct gr_fsess_counts *k; /* the caller's counters */
    int64_t bytes;             /* all sessions' memory, at most GR_FSESS_MAX_BYTES */
};

struct gr_fsess_cache *gr_fsess_cache_new(int32_t slots, int64_t eviction_ms, uint64_t seed,
                                          struct gr_fsess_counts *counts)
{
    struct gr_fsess_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->slots = slots > 0 ? slots : 0;
    c->eviction_ms = eviction_ms;
    c->k = counts;
    c->rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
    if (c->slots && !(c->s = calloc((size_t)c->slots, sizeof *c->s))) {
        free(c);
        return NULL;
    }
    return c;
}

static void sess_free(struct fsess *s)
{
    for (int32_t i = 0; i < s->n; i++)
        free(s->parts[i].name);
    free(s->parts);
    free(s);
}

void gr_fsess_cache_free(struct gr_fsess_cache *c)
{
    if (!c) return;
    for (int32_t i = 0; i < c->n; i++)
        sess_free(c->s[i]);
    free(c->s);
    free(c);
}

static int32_t find_idx(const struct gr_fsess_cache *c, int32_t id)
{
    for (int32_t i = 0; i < c->n; i++)
        if (c->s[i]->id == id) return i;
    return -1;
}

static void remove_idx(struct gr_fsess_cache *c, int32_t i)
{
    c->k->partitions -= c->s[i]->n;
    c->bytes -= c->s[i]->bytes;
    sess_free(c->s[i]);
    c->s[i] = c->s[--c->n];
    c->k->sessions = c->n;
}

/* Kafka's FetchSessionCache.touch: last use now; evictable by privileged sessions when not privileged or
   older than eviction_ms, by all when older than eviction_ms. */
static void touch(const struct gr_fsess_cache *c, struct fsess *s, int64_t now)
{
    s->last_used_ms = now;
    bool old = now - s->created_ms > c->eviction_ms;
    s->ev_priv = !s->privileged || old;
    s->ev_all = old;
}

/* Kafka's EvictableKey order: privileged (false first), size, id. */
static int key_cmp(bool pa, int32_t sa, int32_t ia, bool pb, int32_t sb, int32_t ib)
{
    if (pa != pb) return pa ? 1 : -1;
    if (sa != sb) return sa < sb ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

/* Kafka's FetchSessionCache.tryEvict for a new session (privileged, size). */
static bool try_evict(struct gr_fsess_cache *c, bool privileged, int32_t size, int64_t now)
{
    int32_t lru = -1, best = -1;
    for (int32_t i = 0; i < c->n; i++) {
        struct fsess *s = c->s[i];
        if (lru < 0 || s->last_used_ms < c->s[lru]->last_used_ms ||
            (s->last_used_ms == c->s[lru]->last_used_ms && s->id < c->s[lru]->id))
            lru = i;
        if (!(privileged ? s->ev_priv : s->ev_all)) continue;
        if (best < 0 ||
            key_cmp(s->privileged, s->n, s->id, c->s[best]->privileged, c->s[best]->n, c->s[best]->id) < 0)
            best = i;
    }
    if (lru < 0) return false;
    if (now - c->s[lru]->last_used_ms > c->eviction_ms) { /* a stale session first */
        remove_idx(c, lru);
        return true;
    }
    if (best < 0) return false;
    struct fsess *b = c->s[best];
    if (key_cmp(privileged, size, 0, b->privileged, b->n, b->id) < 0) return false;
    remove_idx(c, best);
    return true;
}

static int32_t new_id(struct gr_fsess_cache *c)
{
    for (;;) { /* xorshift64*: positive, non-zero, unused */
        c->rng ^= c->rng >> 12;
        c->rng ^= c->rng << 25;
        c->rng ^= c->rng >> 27;
        int32_t id = (int32_t)((c->rng * 0x2545F4914F6CDD1DULL) >> 33);
        if (id > 0 && find_idx(c, id) < 0) return id;
    }
}

/* The key of a request partition: by id with ids, else by name. */
struct pkey {
    bool ids;
    const uint8_t *id;
    const char *name;
    int32_t name_len;
    int32_t partition;
};

static int pcmp(const struct pkey *k, const struct fpart *p)
{
    int r;
    if (k->ids)
        r = memcmp(k->id, p->id, 16);
    else if (k->name_len != p->name_len)
        r = k->name_len < p->name_len ? -1 : 1;
    else
        r = k->name_len ? memcmp(k->name, p->name, (size_t)k->name_len) : 0;
    if (r) return r;
    return k->partition < p->partition ? -1 : k->partition > p->partition;
}

/* Index of `k` in `s`, or -(insertion point) - 1. */
static int32_t part_find(const struct fsess *s, const struct pkey *k)
{
    int32_t lo = 0, hi = s->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int r = pcmp(k, &s->parts[mid]);
        if (!r) return mid;
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -lo - 1;
}

static void part_set(struct fpart *p, const struct gr_fetch_request_fetch_partition *q)
{
    p->fetch_offset = q->fetch_offset;
    p->log_start_offset = q->log_start_offset;
    p->max_bytes = q->partition_max_bytes;
    p->leader_epoch = q->current_leader_epoch;
    p->last_fetched_epoch = q->last_fetched_epoch;
}

/* Updates or adds (high watermark -1: sent in the next answer) one partition. Returns 0, or -1 out of memory
   or over GR_FSESS_MAX_PARTITIONS. */
static int sess_upsert(struct fsess *s, const struct pkey *k,
                       const struct gr_fetch_request_fetch_partition *q, int64_t hw, int64_t lso)
{
    int32_t at = part_find(s, k);
    if (at >= 0) {
        part_set(&s->parts[at], q);
        return 0;
    }
    at = -at - 1;
    if (s->n >= GR_FSESS_MAX_PARTITIONS) return -1;
    if (s->n == s->cap) {
        int32_t cap = s->cap ? s->cap * 2 : 16;
        struct fpart *np = realloc(s->parts, (size_t)cap * sizeof *np);
        if (!np) return -1;
        s->parts = np;
        s->cap = cap;
    }
    struct fpart p = {.partition = k->partition, .hw = hw, .lso_local = lso};
    if (k->ids)
        memcpy(p.id, k->id, 16);
    else {
        if (!(p.name = malloc((size_t)k->name_len + 1))) return -1;
        if (k->name_len) memcpy(p.name, k->name, (size_t)k->name_len);
        p.name[k->name_len] = 0;
        p.name_len = k->name_len;
    }
    part_set(&p, q);
    memmove(&s->parts[at + 1], &s->parts[at], (size_t)(s->n - at) * sizeof *s->parts);
    s->parts[at] = p;
    s->n++;
    s->bytes += (int64_t)sizeof p + (p.name ? p.name_len + 1 : 0);
    return 0;
}

static void sess_forget(struct fsess *s, const struct pkey *k)
{
    int32_t at = part_find(s, k);
    if (at < 0) return;
    s->bytes -= (int64_t)sizeof *s->parts + (s->parts[at].name ? s->parts[at].name_len + 1 : 0);
    free(s->parts[at].name);
    memmove(&s->parts[at], &s->parts[at + 1], (size_t)(s->n - at - 1) * sizeof *s->parts);
    s->n--;
}

static struct pkey topic_key(bool ids, struct gr_str name, const struct gr_uuid *id)
{
    return (struct pkey){.ids = ids, .id = id->b, .name = name.ptr, .name_len = name.len > 0 ? name.len : 0};
}

/* body->topics := the session's partitions, grouped by topic (arena memory). */
static int rewrite_body(const struct fsess *s, struct gr_fetch_request *body, struct gr_arena *arena)
{
    int32_t nt = 0;
    for (int32_t i = 0; i < s->n; i++) {
        const struct fpart *a = &s->parts[i], *b = i ? &s->parts[i - 1] : NULL;
        if (!b || (s->uses_ids ? memcmp(a->id, b->id, 16) != 0
                               : a->name_len != b->name_len || memcmp(a->name, b->name, (size_t)a->name_len)))
            nt++;
    }
    struct gr_fetch_request_fetch_topic *ts = gr_arena_calloc(arena, (size_t)nt + 1, sizeof *ts);
    struct gr_fetch_request_fetch_partition *ps = gr_arena_calloc(arena, (size_t)s->n + 1, sizeof *ps);
    if (!ts || !ps) return -1;
    int32_t t = -1;
    for (int32_t i = 0; i < s->n; i++) {
        const struct fpart *a = &s->parts[i], *b = i ? &s->parts[i - 1] : NULL;
        if (!b ||
            (s->uses_ids ? memcmp(a->id, b->id, 16) != 0
                         : a->name_len != b->name_len || memcmp(a->name, b->name, (size_t)a->name_len))) {
            t++;
            gr_fetch_request_fetch_topic_init(&ts[t]);
            if (s->uses_ids)
                memcpy(ts[t].topic_id.b, a->id, 16);
            else {
                char *nm = gr_arena_alloc(arena, (size_t)a->name_len + 1);
                if (!nm) return -1;
                memcpy(nm, a->name, (size_t)a->name_len + 1);
                ts[t].topic = (struct gr_str){nm, a->name_len};
            }
            ts[t].partitions.items = &ps[i];
            ts[t].partitions.count = 0;
        }
        struct gr_fetch_request_fetch_partition *q = &ps[i];
        gr_fetch_request_fetch_partition_init(q);
        q->partition = a->partition;
        q->fetch_offset = a->fetch_offset;
        q->log_start_offset = a->log_start_offset;
        q->partition_max_bytes = a->max_bytes;
        q->current_leader_epoch = a->leader_epoch;
        q->last_fetched_epoch = a->last_fetched_epoch;
        ts[t].partitions.count++;
    }
    body->topics.items = ts;
    body->topics.count = nt;
    return 0;
}

/* Kafka's SessionErrorContext: the error, session 0, no partitions. Returns 1. */
static int session_error(struct gr_fsess_cache *c, struct gr_fetch_response *resp, int16_t err)
{
    if (c) c->k->errors++;
    resp->error_code = err;
    resp->session_id = 0;
    resp->responses.count = 0;
    return 1;
}

int gr_fsess_begin(struct gr_fsess_cache *c, int16_t version, struct gr_fetch_request *body,
                   struct gr_fetch_response *resp, bool privileged, int64_t now_ms, struct gr_arena *arena,
                   struct gr_fsess_req *out)
{
    *out = (struct gr_fsess_req){
        .kind = GR_FSESS_NONE, .privileged = privileged, .version = version, .now_ms = now_ms};
    if (!c) /* no cache (a test fixture): every fetch is sessionless, an incremental one names no session */
        return version < 7 || body->session_epoch == 0 || body->session_epoch == -1
                   ? 0
                   : session_error(c, resp, GR_ERR_FETCH_SESSION_ID_NOT_FOUND);
    if (version < 7) {
        c->k->sessionless++;
        return 0;
    }
    if (body->session_epoch == 0 || body->session_epoch == -1) { /* full: a named session is closed */
        int32_t i = body->session_id ? find_idx(c, body->session_id) : -1;
        if (i >= 0) remove_idx(c, i);
        if (body->session_epoch == -1) {
            c->k->sessionless++;
            return 0;
        }
        out->kind = GR_FSESS_FULL;
        c->k->full++;
        return 0;
    }
    int32_t i = find_idx(c, body->session_id);
    if (i < 0) return session_error(c, resp, GR_ERR_FETCH_SESSION_ID_NOT_FOUND);
    struct fsess *s = c->s[i];
    if (s->epoch != body->session_epoch) return session_error(c, resp, GR_ERR_INVALID_FETCH_SESSION_EPOCH);
    bool ids = version >= 13;
    if (s->uses_ids != ids) return session_error(c, resp, GR_ERR_FETCH_SESSION_TOPIC_ID_ERROR);
    int32_t before = s->n;
    int64_t before_bytes = s->bytes;
    bool over = false;
    for (int32_t t = 0; t < body->topics.count && !over; t++) {
        const struct gr_fetch_request_fetch_topic *qt = &body->topics.items[t];
        struct pkey k = topic_key(ids, qt->topic, &qt->topic_id);
        for (int32_t p = 0; p < qt->partitions.count && !over; p++) {
            k.partition = qt->partitions.items[p].partition;
            over = sess_upsert(s, &k, &qt->partitions.items[p], -1, -1) < 0;
        }
    }
    for (int32_t t = 0; t < body->forgotten_topics_data.count && !over; t++) {
        const struct gr_fetch_request_forgotten_topic *ft = &body->forgotten_topics_data.items[t];
        struct pkey k = topic_key(ids, ft->topic, &ft->topic_id);
        for (int32_t p = 0; p < ft->partitions.count; p++) {
            k.partition = ft->partitions.items[p];
            sess_forget(s, &k);
        }
    }
    c->k->partitions += s->n - before;
    c->bytes += s->bytes - before_bytes;
    /* Kafka: an emptied session is removed, the request answered sessionless; ours: so is one over a bound */
    if (over || s->n == 0 || c->bytes > GR_FSESS_MAX_BYTES) {
        remove_idx(c, i);
        c->k->sessionless++;
        return 0;
    }
    touch(c, s, now_ms);
    s->epoch = s->epoch == INT32_MAX ? 1 : s->epoch + 1; /* Kafka's FetchMetadata.nextEpoch */
    out->kind = GR_FSESS_INCR;
    out->session_id = s->id;
    c->k->incremental++;
    return rewrite_body(s, body, arena) < 0 ? -1 : 0;
}

static bool has_records(const struct gr_records *r)
{
    return r->kind == GR_RECORDS_FILE ? r->file.bytes > 0 : r->mem.len > 0;
}

/* Kafka's CachedPartition.maybeUpdateResponseData (updating the cached values). */
static bool must_respond(struct fpart *p, const struct gr_fetch_response_partition_data *rp)
{
    bool must = has_records(&rp->records);
    if (p->hw != rp->high_watermark) {
        must = true;
        p->hw = rp->high_watermark;
    }
    if (p->lso_local != rp->log_start_offset) {
        must = true;
        p->lso_local = rp->log_start_offset;
    }
    if (rp->preferred_read_replica != -1) must = true;
    if (rp->error_code) {
        p->hw = -1; /* re-sent once the error goes away */
        must = true;
    }
    if (rp->diverging_epoch.epoch >= 0) must = true;
    return must;
}

static void end_full(struct gr_fsess_cache *c, const struct gr_fsess_req *r, int16_t version,
                     const struct gr_fetch_request *body, struct gr_fetch_response *resp, int64_t now_ms)
{
    resp->session_id = 0;
    int32_t size = 0;
    for (int32_t t = 0; t < body->topics.count; t++)
        size += body->topics.items[t].partitions.count > 0 ? body->topics.items[t].partitions.count : 0;
    if (size > GR_FSESS_MAX_PARTITIONS || c->slots == 0) return;
    if (c->n >= c->slots && !try_evict(c, r->privileged, size, now_ms)) return;
    struct fsess *s = calloc(1, sizeof *s);
    if (!s) return;
    s->uses_ids = version >= 13;
    s->privileged = r->privileged;
    s->created_ms = now_ms;
    s->epoch = 1;
    for (int32_t t = 0; t < body->topics.count && t < resp->responses.count; t++) {
        const struct gr_fetch_request_fetch_topic *qt = &body->topics.items[t];
        const struct gr_fetch_response_fetchable_topic_response *rt = &resp->responses.items[t];
        struct pkey k = topic_key(s->uses_ids, qt->topic, &qt->topic_id);
        for (int32_t p = 0; p < qt->partitions.count && p < rt->partitions.count; p++) {
            const struct gr_fetch_response_partition_data *rp = &rt->partitions.items[p];
            k.partition = qt->partitions.items[p].partition;
            int64_t hw = rp->error_code ? -1 : rp->high_watermark;
            if (sess_upsert(s, &k, &qt->partitions.items[p], hw, rp->log_start_offset) < 0) {
                sess_free(s);
                return;
            }
            int32_t at = part_find(s, &k); /* a duplicate: the last one's answer */
            s->parts[at].hw = hw;
            s->parts[at].lso_local = rp->log_start_offset;
        }
    }
    if (c->bytes + s->bytes > GR_FSESS_MAX_BYTES) { /* answered without a session */
        sess_free(s);
        return;
    }
    c->bytes += s->bytes;
    s->id = new_id(c);
    touch(c, s, now_ms);
    c->s[c->n++] = s;
    c->k->sessions = c->n;
    c->k->partitions += s->n;
    resp->session_id = s->id;
}

void gr_fsess_end(struct gr_fsess_cache *c, const struct gr_fsess_req *r, const struct gr_fetch_request *body,
                  struct gr_fetch_response *resp, int64_t now_ms)
{
    if (!c || r->kind == GR_FSESS_NONE) return;
    if (r->kind == GR_FSESS_FULL) {
        end_full(c, r, r->version, body, resp, now_ms);
        return;
    }
    resp->session_id = r->session_id;
    int32_t i = find_idx(c, r->session_id);
    if (i < 0) return; /* closed meanwhile: everything is sent, the next request learns it is gone */
    struct fsess *s = c->s[i];
    int32_t nt = 0;
    for (int32_t t = 0; t < resp->responses.count; t++) {
        struct gr_fetch_response_fetchable_topic_response *rt = &resp->responses.items[t];
        struct pkey k = topic_key(s->uses_ids, rt->topic, &rt->topic_id);
        int32_t np = 0;
        for (int32_t p = 0; p < rt->partitions.count; p++) {
            struct gr_fetch_response_partition_data *rp = &rt->partitions.items[p];
            k.partition = rp->partition_index;
            int32_t at = part_find(s, &k);
            if (at >= 0 && !must_respond(&s->parts[at], rp)) continue;
            if (np != p) rt->partitions.items[np] = *rp;
            np++;
        }
        rt->partitions.count = np;
        if (!np) continue;
        if (nt != t) resp->responses.items[nt] = *rt;
        nt++;
    }
    resp->responses.count = nt;
}

bool gr_fsess_start(struct gr_req *req, struct gr_fsess_req *out, bool privileged)
{
    struct gr_fetch_request *body = req->body;
    int64_t now_ms = gr_time_mono_ms();
    int rc = gr_fsess_begin(req->broker->fetch_sessions, req->hdr.request_api_version, body, req->resp,
                            privileged, now_ms, &req->arena, out);
    if (!rc) return false;
    if (rc < 0) out->kind = GR_FSESS_NOMEM;
    body->topics.count = 0; /* nothing to read or wait for */
    return true;
}

void gr_fsess_finish(struct gr_req *req, const struct gr_fsess_req *r)
{
    if (r->kind == GR_FSESS_NOMEM) {
        gr_req_complete(req, GR_HANDLER_CLOSE);
        return;
    }
    gr_fsess_end(req->broker->fetch_sessions, r, req->body, req->resp, r->now_ms);
    gr_req_finish(req);
}
