/*
 * produce_request.c: Produce request shaping, pure over the decoded request and an arena
 * (produce_request.h): the repeated topics and partitions merged as Kafka's map of them does (sorting keys,
 * so O(n log n) in the request's topics and partitions: a Produce may name millions of partitions (a 100 MiB
 * frame of empty entries), so no pairwise comparison), the transactional refusal check, the response arrays
 * and a partition's entry filled from its produce result or an error.
 * Read next: server/handlers/produce.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/record_batch.h"
#include "server/handlers/produce_request.h"

/* A request topic (by name, or by topic id from v13) or partition, sortable to find repeats in O(n log n): a
   Produce may name millions of partitions (a 100 MiB frame of empty entries), so no pairwise comparison. */
struct pd_key {
    struct gr_str name;   /* topic keys: the name (by_id false) */
    const uint8_t *id;    /* topic keys: the topic id (by_id true) */
    int32_t topic, index; /* partition keys: the first request topic of its name or id, the partition index */
    int32_t pos;          /* request order: topic index, or partition position over the whole request */
    int32_t k, p;         /* partition keys: where it is (request topic k, entry p) */
};

/* Orders topic keys by name (or id) only. */
static int topic_name_cmp(const struct pd_key *a, const struct pd_key *b)
{
    if (a->id) return memcmp(a->id, b->id, 16);
    int32_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
    int c = n > 0 ? memcmp(a->name.ptr, b->name.ptr, (size_t)n) : 0;
    return c ? c : (a->name.len > b->name.len) - (a->name.len < b->name.len);
}

static int topic_key_cmp(const void *x, const void *y)
{
    const struct pd_key *a = x, *b = y;
    int c = topic_name_cmp(a, b);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static int part_key_cmp(const void *x, const void *y)
{
    const struct pd_key *a = x, *b = y;
    if (a->topic != b->topic) return a->topic < b->topic ? -1 : 1;
    if (a->index != b->index) return a->index < b->index ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static int pos_cmp(const void *x, const void *y)
{
    const struct pd_key *a = x, *b = y;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

bool gr_produce_merge_duplicates(struct gr_produce_request *body, bool by_id, struct gr_arena *arena)
{
    int32_t nt = body->topic_data.count > 0 ? body->topic_data.count : 0, total = 0;
    struct gr_produce_request_topic_produce_data *td = body->topic_data.items;
    for (int32_t i = 0; i < nt; i++)
        total += td[i].partition_data.count > 0 ? td[i].partition_data.count : 0;
    if (nt <= 1 && total <= 1) return true;
    struct pd_key *keys = gr_arena_calloc(arena, (size_t)(nt > total ? nt : total) + 1, sizeof *keys);
    int32_t *first = gr_arena_calloc(arena, (size_t)nt + 1, sizeof *first);
    if (!keys || !first) return false;
    for (int32_t i = 0; i < nt; i++)
        keys[i] = (struct pd_key){.name = td[i].name, .id = by_id ? td[i].topic_id.b : NULL, .pos = i};
    qsort(keys, (size_t)nt, sizeof *keys, topic_key_cmp);
    bool dup = false;
    for (int32_t i = 0; i < nt;
         i++) { /* equal keys sort by position: the first one is the first occurrence */
        bool same = i > 0 && topic_name_cmp(&keys[i - 1], &keys[i]) == 0;
        first[keys[i].pos] = same ? first[keys[i - 1].pos] : keys[i].pos;
        dup |= same;
    }
    int32_t n = 0;
    for (int32_t k = 0; k < nt; k++)
        for (int32_t p = 0; p < td[k].partition_data.count; p++, n++)
            keys[n] = (struct pd_key){
                .topic = first[k], .index = td[k].partition_data.items[p].index, .pos = n, .k = k, .p = p};
    qsort(keys, (size_t)n, sizeof *keys, part_key_cmp);
    int32_t kept = 0; /* each run of equal (topic, index): the first's place, the last's records */
    for (int32_t i = 0; i < n; i++) {
        if (i > 0 && keys[i].topic == keys[i - 1].topic && keys[i].index == keys[i - 1].index) {
            keys[kept - 1].k = keys[i].k; /* the records of the later occurrence */
            keys[kept - 1].p = keys[i].p;
            dup = true;
            continue;
        }
        keys[kept++] = keys[i];
    }
    if (!dup) return true;
    qsort(keys, (size_t)kept, sizeof *keys, pos_cmp); /* request order of first occurrences */
    struct gr_produce_request_topic_produce_data *out = gr_arena_calloc(arena, (size_t)nt + 1, sizeof *out);
    int32_t *count = gr_arena_calloc(arena, (size_t)nt + 1, sizeof *count);
    struct gr_produce_request_partition_produce_data *pd =
        gr_arena_calloc(arena, (size_t)kept + 1, sizeof *pd);
    int32_t *slot = gr_arena_calloc(arena, (size_t)nt + 1, sizeof *slot);
    if (!out || !count || !pd || !slot) return false;
    for (int32_t i = 0; i < kept; i++)
        count[keys[i].topic]++;
    int32_t nout = 0, at = 0;
    for (int32_t i = 0; i < nt;
         i++) { /* topics in order of first occurrence, each with its partitions' room */
        if (first[i] != i) continue;
        out[nout] = td[i];
        out[nout].partition_data.items = pd + at;
        out[nout].partition_data.count = td[i].partition_data.count < 0 && count[i] == 0 ? -1 : 0; /* null */
        slot[i] = nout++;
        at += count[i];
    }
    for (int32_t i = 0; i < kept; i++) {
        struct gr_produce_request_topic_produce_data *o = &out[slot[keys[i].topic]];
        struct gr_produce_request_partition_produce_data e = td[keys[i].k].partition_data.items[keys[i].p];
        e.index = keys[i].index;
        o->partition_data.items[o->partition_data.count++] = e;
    }
    body->topic_data.items = out;
    body->topic_data.count = nout;
    return true;
}

bool gr_produce_response_alloc(const struct gr_produce_request *body, struct gr_produce_response *resp,
                               struct gr_arena *arena)
{
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    resp->responses.items = gr_arena_calloc(arena, (size_t)ntopics + 1, sizeof *resp->responses.items);
    if (!resp->responses.items) return false;
    resp->responses.count = ntopics;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_produce_response_topic_produce_response *tr = &resp->responses.items[i];
        gr_produce_response_topic_produce_response_init(tr);
        int32_t np = body->topic_data.items[i].partition_data.count;
        if (np < 0) np = 0;
        tr->partition_responses.items =
            gr_arena_calloc(arena, (size_t)np + 1, sizeof *tr->partition_responses.items);
        if (!tr->partition_responses.items) return false;
        tr->partition_responses.count = np;
    }
    return true;
}

bool gr_produce_request_transactional(const struct gr_produce_request *body)
{
    if (body->transactional_id.len >= 0) return true;
    for (int32_t i = 0; i < body->topic_data.count; i++) {
        const struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        for (int32_t p = 0; p < td->partition_data.count; p++) {
            struct gr_bytes rec = td->partition_data.items[p].records.mem;
            size_t pos = 0, len;
            const uint8_t *batch;
            if (rec.len > 0 && gr_batch_next(rec.ptr, (size_t)rec.len, &pos, &batch, &len) == 1 &&
                (gr_batch_attributes(batch) & GR_BATCH_ATTR_TRANSACTIONAL))
                return true;
        }
    }
    return false;
}

void gr_produce_partition_error(struct gr_produce_response_partition_produce_response *pr, int16_t code,
                                const char *msg)
{
    pr->error_code = code;
    pr->base_offset = -1;
    pr->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
}

void gr_produce_fill_partition(const struct gr_produce_result *r,
                               struct gr_produce_response_partition_produce_response *pr,
                               struct gr_arena *arena)
{
    pr->error_code = r->error_code;
    pr->base_offset = r->base_offset;
    pr->log_append_time_ms = r->log_append_time_ms;
    pr->log_start_offset = r->log_start_offset;
    pr->error_message = r->error_message ? gr_str_c(r->error_message) : GR_STR_NULL;
    if (!r->record_error_count) return;
    struct gr_produce_response_batch_index_and_error_message *items =
        gr_arena_calloc(arena, (size_t)r->record_error_count, sizeof *items);
    if (!items) return; /* the refusal without its record list */
    for (int i = 0; i < r->record_error_count; i++) {
        gr_produce_response_batch_index_and_error_message_init(&items[i]);
        items[i].batch_index = r->record_errors[i].batch_index;
        const char *m = r->record_errors[i].message;
        items[i].batch_index_error_message = m ? gr_str_c(m) : GR_STR_NULL;
    }
    pr->record_errors.items = items;
    pr->record_errors.count = r->record_error_count;
}

int gr_produce_request_partitions(const struct gr_produce_request *body)
{
    int total = 0;
    for (int32_t i = 0; i < body->topic_data.count; i++)
        total += body->topic_data.items[i].partition_data.count > 0
                     ? body->topic_data.items[i].partition_data.count
                     : 0;
    return total;
}
