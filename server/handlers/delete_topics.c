/*
 * delete_topics.c: DeleteTopics (key 20), v1-v6. v1-v5 name topics in topic_names; v6 names each topic
 * either by name or by topic id in topics[]. Checks follow Kafka 4.1's ControllerApis.deleteTopics:
 * delete.topic.enable=false answers every topic INVALID_REQUEST before v3 and TOPIC_DELETION_DISABLED
 * from v3; a name and an id together, or neither, is INVALID_REQUEST; a name or id given twice is
 * INVALID_REQUEST ("Duplicate topic name." / "Duplicate topic id.", answered once), as is a name and an id
 * that resolve to the same topic; unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID.
 * Gregor difference: Kafka 4.1 deletes __consumer_offsets when asked; Gregor refuses to delete an internal
 * topic (INVALID_REQUEST with a message) because its group coordinator lives in it.
 * Topics are found in the image; each deletion goes through the broker's topic writer (single node: on the
 * I/O pool, after every operation submitted before it, answered once durable (the topic file removed, the
 * partition directories renamed), so timeout_ms never expires; cluster: the record deleted in etcd, answered
 * once the image drops the topic or at timeout_ms); parked fetches are then woken so they see it gone.
 * ACLs (ControllerApis): DESCRIBE on a named topic first (TOPIC_AUTHORIZATION_FAILED, existence not
 * disclosed), an id the principal may not DESCRIBE is UNKNOWN_TOPIC_ID, then DELETE
 * (TOPIC_AUTHORIZATION_FAILED). Read next: cluster/topic_writer.h.
 */
#include <errno.h>
#include <string.h>

#include "cluster/image.h"
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

struct dt_entry {
    struct gr_str name;       /* as requested (null for by-id entries) */
    struct gr_uuid id;        /* as requested (zero for by-name entries) */
    struct gr_image_topic *t; /* resolved topic (the image: every broker knows every topic), NULL on error */
};

static bool uuid_zero(struct gr_uuid u)
{
    static const uint8_t zero[16];
    return memcmp(u.b, zero, 16) == 0;
}

static void fail(struct gr_delete_topics_response_deletable_topic_result *r, int16_t code, const char *msg)
{
    r->error_code = code;
    r->error_message = gr_str_c(msg ? msg : gr_error_message(code));
}

/* Validates one entry against the request (shape, duplicates) and the image (existence); sets e->t and
 * returns GR_ERR_NONE, or returns an error code with *msg (NULL: Kafka's default message). */
static int16_t resolve(struct gr_req *req, struct dt_entry *e, bool repeated, const char **msg)
{
    bool by_name = e->name.len >= 0;
    *msg = NULL;
    if (!by_name && uuid_zero(e->id))
        return *msg = "Neither topic name nor id were specified.", GR_ERR_INVALID_REQUEST;
    if (by_name && !uuid_zero(e->id))
        return *msg = "You may not specify both topic name and topic id.", GR_ERR_INVALID_REQUEST;
    if (repeated)
        return *msg = by_name ? "Duplicate topic name." : "Duplicate topic id.", GR_ERR_INVALID_REQUEST;
    /* ControllerApis: DESCRIBE on a named topic first, its existence not disclosed */
    if (by_name && !gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, e->name))
        return GR_ERR_TOPIC_AUTHORIZATION_FAILED;
    struct gr_image *img = req->broker->image;
    e->t = by_name ? (e->name.len > 0 ? gr_image_topic_find(img, e->name.ptr, (size_t)e->name.len) : NULL)
                   : gr_image_topic_find_id(img, e->id.b);
    if (!e->t) return by_name ? GR_ERR_UNKNOWN_TOPIC_OR_PARTITION : GR_ERR_UNKNOWN_TOPIC_ID;
    struct gr_str tn = {e->t->name, e->t->name_len};
    int16_t denied = !by_name && !gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, tn)
                         ? GR_ERR_UNKNOWN_TOPIC_ID /* an id the principal may not describe: hidden */
                     : !gr_req_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_TOPIC, tn)
                         ? GR_ERR_TOPIC_AUTHORIZATION_FAILED
                         : GR_ERR_NONE;
    if (denied) {
        e->t = NULL;
        return denied;
    }
    if (gr_topic_is_internal(e->t->name)) {
        e->t = NULL;
        *msg = "Gregor keeps its consumer group state in this internal topic; it cannot be deleted";
        return GR_ERR_INVALID_REQUEST;
    }
    return GR_ERR_NONE;
}

struct dt_state {
    struct dt_entry *e;
    int32_t n;
    bool deleted;
    int32_t *first; /* first[i]: the first entry naming the topic the way entry i does (gr_req_keys_first) */
};

/* Entry i's key: kind 0 a name, kind 1 an id (its 16 bytes), an entry of neither shape a kind of its own. */
static struct gr_req_key entry_key(const struct dt_entry *e, int32_t i)
{
    if (e->name.len >= 0 && uuid_zero(e->id)) return (struct gr_req_key){e->name, 0, i};
    if (e->name.len < 0 && !uuid_zero(e->id)) return (struct gr_req_key){{(const char *)e->id.b, 16}, 1, i};
    return (struct gr_req_key){GR_STR_NULL, 2 + i, i};
}

/* One deletion completed. */
static void deleted_one(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    struct dt_state *st = req->hstate;
    struct gr_delete_topics_response_deletable_topic_result *r = item;
    struct dt_entry *e = &st->e[r - ((struct gr_delete_topics_response *)req->resp)->responses.items];
    if (res->error_code == GR_ERR_UNKNOWN_TOPIC_ID) { /* deleted meanwhile by an earlier request */
        fail(r, e->name.len >= 0 ? GR_ERR_UNKNOWN_TOPIC_OR_PARTITION : GR_ERR_UNKNOWN_TOPIC_ID, NULL);
    } else if (res->error_code) {
        fail(r, res->error_code, res->message ? gr_req_strdup(req, gr_str_c(res->message)) : NULL);
    } else {
        GR_INFO("deleted topic %.*s", (int)r->name.len, r->name.ptr);
        st->deleted = true;
        if (req->broker->coord) { /* the groups' committed offsets of the topic go with it (Kafka does) */
            char *name = gr_req_strdup(req, r->name);
            if (name) gr_coord_topic_deleted(req->broker->coord, name);
        }
    }
}

/* Every deletion completed: wake parked fetches, answer each distinct key once. */
static void all_deleted(struct gr_req *req)
{
    struct dt_state *st = req->hstate;
    struct gr_delete_topics_response *resp = req->resp;
    if (st->deleted) gr_broker_wake_parked(req->broker);
    int32_t kept = 0; /* a duplicated name or id is answered once, as Kafka does */
    for (int32_t i = 0; i < st->n; i++)
        if (st->first[i] == i) resp->responses.items[kept++] = resp->responses.items[i];
    resp->responses.count = kept;
}

enum gr_handler_rc gr_handle_delete_topics(struct gr_req *req)
{
    struct gr_delete_topics_request *body = req->body;
    struct gr_delete_topics_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    if (gr_req_topic_barrier(req)) return GR_HANDLER_WAIT; /* earlier topic operations first */
    int32_t n = v >= 6 ? body->topics.count : body->topic_names.count;
    if (n < 0) n = 0;
    struct dt_entry *e = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *e);
    struct dt_state *st = gr_arena_calloc(&req->arena, 1, sizeof *st);
    resp->responses.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->responses.items);
    if (!e || !st || !resp->responses.items) return GR_HANDLER_CLOSE;
    *st = (struct dt_state){e, n, false, NULL};
    req->hstate = st;
    resp->responses.count = n;
    for (int32_t i = 0; i < n; i++) {
        e[i].name = v >= 6 ? body->topics.items[i].name : body->topic_names.items[i];
        e[i].id = v >= 6 ? body->topics.items[i].topic_id : (struct gr_uuid){{0}};
        struct gr_delete_topics_response_deletable_topic_result *r = &resp->responses.items[i];
        gr_delete_topics_response_deletable_topic_result_init(r);
        r->name = e[i].name;
        r->topic_id = e[i].id;
    }
    if (!b->cfg.settings.delete_topic_enable) {
        for (int32_t i = 0; i < n; i++)
            fail(&resp->responses.items[i], v < 3 ? GR_ERR_INVALID_REQUEST : GR_ERR_TOPIC_DELETION_DISABLED,
                 "Topic deletion is disabled.");
        return GR_HANDLER_DONE;
    }
    struct gr_req_key *keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    if (!keys) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        keys[i] = entry_key(&e[i], i);
    bool *repeated;
    if (!(st->first = gr_req_keys_first(req, keys, n, &repeated))) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        const char *msg;
        int16_t err = resolve(req, &e[i], repeated[i], &msg);
        if (err)
            fail(&resp->responses.items[i], err, msg);
        else if (e[i].name.len < 0) /* by id: answer with the name */
            resp->responses.items[i].name = gr_str_c(gr_req_strdup(req, gr_str_c(e[i].t->name)));
    }
    /* a name and an id naming the same topic: both refused, nothing deleted for them */
    for (int32_t i = 0; i < n; i++)
        keys[i] = e[i].t ? (struct gr_req_key){{(const char *)&e[i].t, sizeof e[i].t}, 0, i}
                         : (struct gr_req_key){GR_STR_NULL, 1 + i, i};
    bool *same_topic;
    if (!gr_req_keys_first(req, keys, n, &same_topic)) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        if (same_topic[i])
            fail(&resp->responses.items[i], GR_ERR_INVALID_REQUEST,
                 "The provided topic name maps to an ID that was already supplied.");
    for (int32_t i = 0; i < n; i++) {
        struct gr_delete_topics_response_deletable_topic_result *r = &resp->responses.items[i];
        if (!e[i].t || r->error_code) continue;
        memcpy(r->topic_id.b, e[i].t->id, 16);
        if (r->name.len < 0) r->name = gr_str_c(gr_req_strdup(req, gr_str_c(e[i].t->name)));
        if (!gr_req_topic_delete(req, r->topic_id.b, body->timeout_ms, deleted_one, r))
            fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, NULL);
    }
    return gr_req_topic_ops_wait(req, all_deleted);
}
