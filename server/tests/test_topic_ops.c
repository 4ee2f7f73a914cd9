/*
 * test_topic_ops.c: the handlers' side of topic operations on the I/O pool (handlers/topic_ops.c) with a
 * real store and pool. A request's operations park it until the last one completed (a completion during
 * submission never answers early; all_done runs once, before the answer); CreateTopics with 50 partitions
 * returns GR_HANDLER_WAIT with the topic invisible, the network thread (this thread) makes no blocking
 * call meanwhile (storage/sys.h audit) and can serve another request; a CreateTopics pipelined right
 * behind a DeleteTopics of the same name waits for it (gr_req_topic_barrier) and creates the new topic; the
 * lazy __consumer_offsets creation parks a group request and runs its handler afterwards. Read next:
 * server/handlers/topic_ops.c, storage/tests/test_topic_ops.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/image.h"
#include "coordinator/offsets_log.h"
#include "server/groups.h"
#include "cluster/local.h"
#include "server/handlers/handlers.h"
#include "server/tests/fixture.h"
#include "storage/sys.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_broker *b;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.iopool = true});
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    srv_broker_close(f->b, f->dir, NULL);
    free(f);
    return 0;
}

/* A request without a connection: gr_req_finish frees it. */
static struct gr_req *new_req(struct fx *f, int16_t key, int16_t version, size_t body_bytes,
                              size_t resp_bytes)
{
    struct gr_req *req = srv_req_new(f->b, key, version, 1 << 20);
    req->api = gr_api_find(key);
    req->body = gr_arena_calloc(&req->arena, 1, body_bytes);
    req->resp = gr_arena_calloc(&req->arena, 1, resp_bytes);
    return req;
}

/* ---- the helper itself ---- */

struct rec {
    int cbs, all_done;
    int errs[8];
    int parked_at_all_done;
};
static struct rec R;

static void op_cb(struct gr_req *req, void *item, int err, struct gr_topic *t)
{
    (void)req;
    (void)t;
    R.errs[(intptr_t)item] = err;
    R.cbs++;
}

static void all_done(struct gr_req *req)
{
    R.all_done++;
    R.parked_at_all_done = req->parked;
}

static void test_helper_parks_until_last(void **state)
{
    struct fx *f = *state;
    memset(&R, 0, sizeof R);
    struct gr_req *req = new_req(f, 19, 7, 8, 8);
    /* a begin error completes during submission: the request must not be answered yet */
    assert_true(
        gr_req_topic_op(req, gr_topic_op_create("bad/name", 1, NULL, NULL, 0, true), op_cb, (void *)0));
    assert_int_equal(R.cbs, 1);
    assert_int_equal(R.errs[0], -EINVAL);
    assert_true(gr_req_topic_op(req, gr_topic_op_create("h1", 10, NULL, NULL, 0, true), op_cb, (void *)1));
    assert_true(gr_req_topic_op(req, gr_topic_op_create("h1", 2, NULL, NULL, 0, true), op_cb, (void *)2));
    assert_int_equal(R.cbs, 1);
    assert_int_equal(gr_req_topic_ops_wait(req, all_done), GR_HANDLER_WAIT);
    assert_int_equal(f->b->parked_count, 1);
    assert_int_equal(R.all_done, 0);
    gr_iopool_drain(f->b->iopool); /* completions; the last one answers (and frees) the request */
    assert_int_equal(R.cbs, 3);
    assert_int_equal(R.errs[1], 0);
    assert_int_equal(R.errs[2], -EEXIST);
    assert_int_equal(R.all_done, 1);
    assert_true(R.parked_at_all_done);
    assert_int_equal(f->b->parked_count, 0);
    assert_int_equal(gr_topic_partition_count(gr_store_topic_find(f->b->store, "h1", 2)), 10);

    /* nothing submitted (or everything completed inline): answered at once */
    memset(&R, 0, sizeof R);
    req = new_req(f, 19, 7, 8, 8);
    assert_int_equal(gr_req_topic_ops_wait(req, all_done), GR_HANDLER_DONE);
    assert_int_equal(R.all_done, 1);
    gr_req_free(req);
}

/* ---- handlers ---- */

static struct gr_req *create_topics_req(struct fx *f, const char *name, int32_t partitions)
{
    struct gr_req *req =
        new_req(f, 19, 7, sizeof(struct gr_create_topics_request), sizeof(struct gr_create_topics_response));
    struct gr_create_topics_request *body = req->body;
    gr_create_topics_request_init(body);
    gr_create_topics_response_init(req->resp);
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    gr_create_topics_request_creatable_topic_init(&body->topics.items[0]);
    body->topics.items[0].name = gr_str_c(name);
    body->topics.items[0].num_partitions = partitions;
    body->topics.items[0].replication_factor = -1;
    body->topics.items[0].assignments.count = 0;
    body->topics.items[0].configs.count = 0;
    return req;
}

/* DeleteTopics v6 naming one topic. */
static struct gr_req *delete_topics_req(struct fx *f, const char *name)
{
    struct gr_req *req =
        new_req(f, 20, 6, sizeof(struct gr_delete_topics_request), sizeof(struct gr_delete_topics_response));
    struct gr_delete_topics_request *body = req->body;
    gr_delete_topics_request_init(body);
    gr_delete_topics_response_init(req->resp);
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    body->topics.items[0].name = gr_str_c(name);
    return req;
}

static int audit_calls;
static void audit(const char *op, int fd, const char *path)
{
    (void)op;
    (void)fd;
    (void)path;
    audit_calls++;
}

static void test_create_topics_waits_off_thread(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = create_topics_req(f, "big", 50);
    audit_calls = 0;
    gr_sys_audit_this_thread(audit);
    assert_int_equal(gr_handle_create_topics(req), GR_HANDLER_WAIT);
    assert_null(gr_store_topic_find(f->b->store, "big", 3)); /* not live before its files are */
    /* the network thread serves another request meanwhile (a second creation of the same name waits too) */
    struct gr_req *again = create_topics_req(f, "big", 3);
    assert_int_equal(gr_handle_create_topics(again), GR_HANDLER_WAIT);
    assert_int_equal(f->b->parked_count, 2);
    gr_iopool_drain(f->b->iopool);
    gr_sys_audit_this_thread(NULL);
    assert_int_equal(audit_calls, 0);
    assert_int_equal(f->b->parked_count, 0); /* both answered */
    struct gr_topic *t = gr_store_topic_find(f->b->store, "big", 3);
    assert_non_null(t);
    assert_int_equal(gr_topic_partition_count(t), 50); /* the second got TOPIC_ALREADY_EXISTS */
    assert_true(gr_log_high_watermark(gr_topic_log(t, 49)) >= 0);
}

static void test_delete_then_create_same_name(void **state)
{
    struct fx *f = *state;
    struct gr_topic *old;
    assert_int_equal(gr_store_topic_create(f->b->store, "dc", 4, NULL, NULL, 0, &old), 0);
    struct gr_req *del = delete_topics_req(f, "dc");
    assert_int_equal(gr_handle_delete_topics(del), GR_HANDLER_WAIT);
    assert_ptr_equal(gr_store_topic_find(f->b->store, "dc", 2), old); /* live until the delete is durable */
    /* the create arrives before the delete finished (pipelined): it waits behind the delete, then runs */
    struct gr_req *cr = create_topics_req(f, "dc", 2);
    assert_int_equal(gr_handle_create_topics(cr), GR_HANDLER_WAIT);
    assert_int_equal(f->b->parked_count, 2);
    gr_iopool_drain(f->b->iopool);
    assert_int_equal(f->b->parked_count, 0);
    struct gr_topic *t = gr_store_topic_find(f->b->store, "dc", 2);
    assert_non_null(t);
    assert_ptr_not_equal(t, old);
    assert_int_equal(gr_topic_partition_count(t), 2);
}

/* A name repeated in one request gets one INVALID_REQUEST result (Kafka's ControllerApis collects the
 * repeated names in a set), not one per occurrence; the other names are answered as usual. */
static void test_create_topics_duplicate_name_answered_once(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = create_topics_req(f, "dup", 1);
    struct gr_create_topics_request *body = req->body;
    const char *names[] = {"dup", "bad/name", "dup", "dup"};
    body->topics.items = gr_arena_calloc(&req->arena, 4, sizeof *body->topics.items);
    body->topics.count = 4;
    for (int i = 0; i < 4; i++) {
        gr_create_topics_request_creatable_topic_init(&body->topics.items[i]);
        body->topics.items[i].name = gr_str_c(names[i]);
        body->topics.items[i].num_partitions = 1;
        body->topics.items[i].replication_factor = -1;
    }
    assert_int_not_equal(gr_handle_create_topics(req), GR_HANDLER_WAIT); /* nothing to create */
    struct gr_create_topics_response *resp = req->resp;
    assert_int_equal(resp->topics.count, 2);
    assert_true(gr_str_eq(resp->topics.items[0].name, gr_str_c("dup")));
    assert_int_equal(resp->topics.items[0].error_code, GR_ERR_INVALID_REQUEST);
    assert_true(gr_str_eq(resp->topics.items[1].name, gr_str_c("bad/name")));
    assert_int_equal(resp->topics.items[1].error_code, GR_ERR_INVALID_TOPIC_EXCEPTION);
    assert_null(gr_store_topic_find(f->b->store, "dup", 3));
    gr_req_free(req);
}

static void test_lazy_offsets_topic_defers_group_request(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = new_req(f, 10, 3, sizeof(struct gr_find_coordinator_request),
                                 sizeof(struct gr_find_coordinator_response));
    gr_find_coordinator_request_init(req->body);
    gr_find_coordinator_response_init(req->resp);
    ((struct gr_find_coordinator_request *)req->body)->key = gr_str_c("g");
    audit_calls = 0;
    gr_sys_audit_this_thread(audit);
    assert_true(gr_groups_defer(req)); /* parked: __consumer_offsets is being created */
    assert_null(f->b->coord);
    assert_int_equal(f->b->parked_count, 1);
    assert_null(gr_store_topic_find(f->b->store, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC)));
    gr_iopool_drain(f->b->iopool); /* created: coordinator started, FindCoordinator answered (and freed) */
    gr_sys_audit_this_thread(NULL);
    assert_int_equal(audit_calls, 0);
    assert_non_null(f->b->coord);
    assert_int_equal(f->b->parked_count, 0);
    struct gr_topic *t = gr_store_topic_find(f->b->store, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    assert_non_null(t);
    assert_int_equal(gr_topic_partition_count(t), 50);
    assert_string_equal(gr_topic_config_get(t, "cleanup.policy"), "compact");
}

static struct {
    int calls;
    int16_t code;
    const char *msg;
    struct gr_topic *t;
} C;

static void record_created(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    (void)req;
    (void)item;
    C.calls++;
    C.code = res->error_code;
    C.msg = res->message;
    C.t = res->local;
}

/* A restart's image: a fresh one, fed by the store about to open (as main.c's), loaded after the open. */
static void reopen_image(struct fx *f, struct gr_store_config *sc)
{
    gr_image_free(f->b->image);
    f->b->image = gr_image_new(f->b->node_id);
    assert_non_null(f->b->image);
    sc->on_topic_changed = gr_image_local_on_topic;
    sc->on_topic_changed_ctx = f->b->image;
}

/* ENOSPC while the pool creates the files: KAFKA_STORAGE_ERROR, as before the split; nothing visible. An EIO
 * on the delete's commit point: the topic stays live. */
static void test_disk_errors_map_to_storage_error(void **state)
{
    struct fx *f = *state;
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    gr_iopool_drain(f->b->iopool);
    gr_store_close(f->b->store);
    gr_partitions_destroy(f->b->parts); /* a restart: the new store's logs get new partition objects */
    fault_install();                    /* the syscall table changes only while no store is open */
    reopen_image(f, &sc);
    assert_int_equal(gr_store_open(&sc, &f->b->store), 0);
    f->b->parts = gr_partitions_create(&(struct gr_partitions_config){f->b->store, false});
    assert_int_equal(gr_broker_image_load(f->b), 0);
    struct gr_topic *keep;
    assert_int_equal(gr_store_topic_create(f->b->store, "keep", 2, NULL, NULL, 0, &keep), 0);
    gr_store_quiesce(f->b->store);

    memset(&C, 0, sizeof C);
    fault_fail(F_MKDIR, 1, ENOSPC, true);
    struct gr_req *req = new_req(f, 19, 7, 8, 8);
    const char *msg = NULL;
    assert_int_equal(gr_topic_create(req, gr_str_c("nospace"), 3, 1, NULL, NULL, NULL, 0, false, &msg, 0,
                                     record_created, NULL),
                     GR_ERR_NONE);
    assert_int_equal(gr_req_topic_ops_wait(req, NULL), GR_HANDLER_WAIT);
    gr_iopool_drain(f->b->iopool);
    fault_clear(F_MKDIR);
    assert_int_equal(C.calls, 1);
    assert_int_equal(C.code, GR_ERR_KAFKA_STORAGE_ERROR);
    assert_string_equal(C.msg, "The broker could not create the topic's files");
    assert_null(C.t);
    assert_null(gr_store_topic_find(f->b->store, "nospace", 7));

    fault_fail(F_UNLINK, 1, EIO, true);
    struct gr_req *del = delete_topics_req(f, "keep");
    assert_int_equal(gr_handle_delete_topics(del), GR_HANDLER_WAIT);
    gr_iopool_drain(f->b->iopool);
    fault_clear(F_UNLINK);
    assert_ptr_equal(gr_store_topic_find(f->b->store, "keep", 4), keep);
    assert_false(gr_log_offline(gr_topic_log(keep, 1)));

    /* the same name works once the disk does */
    memset(&C, 0, sizeof C);
    req = new_req(f, 19, 7, 8, 8);
    assert_int_equal(gr_topic_create(req, gr_str_c("nospace"), 3, 1, NULL, NULL, NULL, 0, false, &msg, 0,
                                     record_created, NULL),
                     GR_ERR_NONE);
    assert_int_equal(gr_req_topic_ops_wait(req, NULL), GR_HANDLER_WAIT);
    gr_iopool_drain(f->b->iopool);
    assert_int_equal(C.code, GR_ERR_NONE);
    assert_int_equal(gr_topic_partition_count(C.t), 3);
    gr_store_close(f->b->store);
    gr_partitions_destroy(f->b->parts); /* a restart: the new store's logs get new partition objects */
    fault_uninstall();
    reopen_image(f, &sc);
    assert_int_equal(gr_store_open(&sc, &f->b->store), 0);
    f->b->parts = gr_partitions_create(&(struct gr_partitions_config){f->b->store, false});
    assert_int_equal(gr_broker_image_load(f->b), 0);
}

static int16_t set_code = -1;
static void configs_set(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    (void)req, (void)item;
    set_code = res->error_code;
}

/* The single-node writer keeps the image's topic configs: a creation's, then a change's (the store's topic
 * hook copies them), so every broker can answer DescribeConfigs from the image. */
static void test_writer_keeps_image_configs(void **state)
{
    struct fx *f = *state;
    const char *keys[] = {"retention.ms"}, *values[] = {"1234"}, *msg = NULL;
    memset(&C, 0, sizeof C);
    struct gr_req *req = new_req(f, 19, 7, 8, 8);
    assert_int_equal(gr_topic_create(req, gr_str_c("withcfg"), 2, 1, NULL, keys, values, 1, false, &msg, 0,
                                     record_created, NULL),
                     GR_ERR_NONE);
    assert_int_equal(gr_req_topic_ops_wait(req, NULL), GR_HANDLER_WAIT);
    gr_iopool_drain(f->b->iopool);
    assert_int_equal(C.code, GR_ERR_NONE);
    struct gr_image_topic *it = gr_image_topic_find(f->b->image, "withcfg", 7);
    assert_non_null(it);
    assert_ptr_equal(it->local, C.t);
    assert_string_equal(gr_image_topic_config(it, "retention.ms"), "1234");
    const char *k2[] = {"segment.bytes"}, *v2[] = {"2000000"};
    req = new_req(f, 19, 7, 8, 8);
    assert_true(gr_req_topic_set_configs(req, it->id, k2, v2, 1, configs_set, NULL));
    assert_int_equal(gr_req_topic_ops_wait(req, NULL), GR_HANDLER_WAIT);
    gr_iopool_drain(f->b->iopool);
    assert_int_equal(set_code, GR_ERR_NONE);
    assert_null(gr_image_topic_config(it, "retention.ms"));
    assert_string_equal(gr_image_topic_config(it, "segment.bytes"), "2000000");
}

/* gr_req_keys_first: repeats found by sorting (kind and bytes), first occurrences and every repeated entry
   marked; a null name equals nothing; 200,000 entries with one repeat far apart. */
static void test_req_keys_first(void **state)
{
    (void)state;
    struct gr_req *req = calloc(1, sizeof *req);
    gr_arena_init(&req->arena, 16 << 20);
    struct gr_req_key k[7] = {{gr_str_c("b"), 0, 0}, {gr_str_c("a"), 0, 1}, {gr_str_c("b"), 0, 2},
                              {gr_str_c("a"), 1, 3}, {gr_str_c("c"), 0, 4}, {gr_str_c("b"), 0, 5},
                              {GR_STR_NULL, 0, 6}};
    bool *rep;
    int32_t *first = gr_req_keys_first(req, k, 7, &rep);
    assert_non_null(first);
    static const int32_t want_first[] = {0, 1, 0, 3, 4, 0, 6};
    static const bool want_rep[] = {true, false, true, false, false, true, false};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(first[i], want_first[i]);
        assert_int_equal(rep[i], want_rep[i]);
    }
    int32_t n = 200000;
    struct gr_req_key *big = gr_arena_calloc(&req->arena, (size_t)n, sizeof *big);
    char *names = gr_arena_calloc(&req->arena, (size_t)n, 8);
    for (int32_t i = 0; i < n; i++) {
        snprintf(names + 8 * i, 8, "%07d", i == n - 1 ? 17 : i);
        big[i] = (struct gr_req_key){{names + 8 * i, 7}, 0, i};
    }
    first = gr_req_keys_first(req, big, n, &rep);
    assert_non_null(first);
    assert_int_equal(first[n - 1], 17);
    assert_true(rep[17] && rep[n - 1]);
    assert_false(rep[16] || rep[18]);
    for (int32_t i = 0; i < n - 1; i++)
        assert_int_equal(first[i], i);
    gr_arena_reset(&req->arena);
    free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_helper_parks_until_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_topics_waits_off_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_then_create_same_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_topics_duplicate_name_answered_once, setup, teardown),
        cmocka_unit_test(test_req_keys_first),
        cmocka_unit_test_setup_teardown(test_lazy_offsets_topic_defers_group_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_errors_map_to_storage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_keeps_image_configs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
