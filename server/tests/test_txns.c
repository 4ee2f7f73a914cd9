/*
 * test_txns.c: the transaction coordinator's server binding on one node (server/txns.c) with a real store,
 * I/O pool and producer id allocator. With no setting at all (transactions are always on), the first
 * FindCoordinator with key type 1 is parked while __transaction_state is
 * created on the pool (Kafka's configs, 50 partitions) with no call that may wait for the disk on this
 * thread (storage/sys.h audit), then names this broker; every partition loads at coordinator epoch 1 (the
 * epoch file holds 1). A coordinator write (InitProducerId's Empty record, its id from the broker's
 * allocator) goes through the append hook and is reported once committed, never inside the hook; a new
 * start loads at epoch 2 and replays that write.
 * Read next: server/txns.c, compat-tests/txn/run.sh (the same through the wire).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/txn.h"
#include "protocol/errors.h"
#include "coordinator/records.h"
#include "server/groups.h"
#include "server/producer_ids.h"
#include "server/tests/fixture.h"
#include "server/txns.h"
#include "storage/sys.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_broker *b;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.iopool = true, .node_id = 1});
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

static struct gr_req *find_coordinator(struct fx *f, int8_t key_type, const char *key)
{
    struct gr_req *req = srv_req_new(f->b, GR_API_FIND_COORDINATOR, 3, 1 << 16);
    req->api = gr_api_find(GR_API_FIND_COORDINATOR);
    req->body = gr_arena_calloc(&req->arena, 1, sizeof(struct gr_find_coordinator_request));
    req->resp = gr_arena_calloc(&req->arena, 1, sizeof(struct gr_find_coordinator_response));
    gr_find_coordinator_request_init(req->body);
    gr_find_coordinator_response_init(req->resp);
    struct gr_find_coordinator_request *body = req->body;
    body->key = gr_str_c(key);
    body->key_type = key_type;
    return req;
}

static int audit_calls;
static void audit(const char *op, int fd, const char *path)
{
    fprintf(stderr, "network thread: %s fd %d %s\n", op, fd, path ? path : "");
    audit_calls++;
}

/* Runs the loop and the pool until every partition is loaded (bounded). */
static void until_loaded(struct fx *f)
{
    for (int i = 0; i < 10000 && gr_txns_loaded(f->b) < 50; i++) {
        gr_iopool_drain(f->b->iopool);
        ev_run(f->b->loop, EVRUN_NOWAIT);
    }
    assert_int_equal(gr_txns_loaded(f->b), 50);
}

static int32_t epoch_file(struct fx *f)
{
    uint8_t buf[4];
    assert_int_equal(gr_store_meta_read(f->b->store, GR_TXN_EPOCH_FILE, buf, sizeof buf), 0);
    return (int32_t)((uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3]);
}

static void test_first_lookup_creates_and_loads(void **state)
{
    struct fx *f = *state;
    assert_null(f->b->txn); /* nothing made before the first lookup */
    assert_null(gr_store_topic_find(f->b->store, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC)));
    struct gr_req *group = find_coordinator(f, 0, "g");
    assert_false(gr_txns_defer(group)); /* key type 0: not the transaction binding's */
    gr_req_free(group);

    struct gr_req *req = find_coordinator(f, 1, "tx");
    audit_calls = 0;
    gr_sys_audit_this_thread(audit);
    assert_true(gr_txns_defer(req)); /* parked while the topic is created on the pool */
    assert_int_equal(f->b->parked_count, 1);
    assert_null(gr_store_topic_find(f->b->store, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC)));
    until_loaded(f); /* the handler ran (answered, freed), then the epoch save and the loads */
    gr_sys_audit_this_thread(NULL);
    assert_int_equal(audit_calls, 0);
    assert_int_equal(f->b->parked_count, 0);
    struct gr_topic *t = gr_store_topic_find(f->b->store, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC));
    assert_non_null(t);
    assert_int_equal(gr_topic_partition_count(t), 50);
    assert_string_equal(gr_topic_config_get(t, "cleanup.policy"), "compact");
    assert_string_equal(gr_topic_config_get(t, "segment.bytes"), "104857600");
    assert_string_equal(gr_topic_config_get(t, "min.insync.replicas"), "1");
    assert_string_equal(gr_topic_config_get(t, "compression.type"), "uncompressed");
    assert_non_null(f->b->txn);
    assert_int_equal(gr_txns_epoch(f->b), 1);
    assert_int_equal(epoch_file(f), 1);
    int32_t node = -1;
    assert_int_equal(gr_txns_coordinator(f->b, gr_str_c("tx"), &node), GR_ERR_NONE);
    assert_int_equal(node, 1);

    /* a second lookup: the topic exists, nothing is parked */
    req = find_coordinator(f, 1, "tx");
    assert_false(gr_txns_defer(req));
    gr_req_free(req);
}

static void hold(struct fx *f)
{
    for (int i = 0; i < 100; i++) {
        gr_iopool_drain(f->b->iopool);
        ev_run(f->b->loop, EVRUN_NOWAIT);
    }
}

/* A waiter's answer hook: records the error code in ctx. */
static void record_answer(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    *(int16_t *)w->ctx = res->error_code;
}

static void test_write_committed_and_replayed(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_producer_ids_start(f->b), 0);
    struct gr_req *req = find_coordinator(f, 1, "tx");
    assert_true(gr_txns_defer(req));
    until_loaded(f);
    struct gr_str id = gr_str_c("tx-1");
    struct gr_txn_info info;
    int16_t answered = -1;
    struct gr_txns_waiter waiter = {.answer = record_answer, .ctx = &answered};
    /* the allocator's first block was saved meanwhile: an id at once, and the Empty record written */
    gr_txn_init_producer_id(f->b->txn, &waiter, id, 60000, -1, -1);
    assert_int_equal(gr_txn_describe(f->b->txn, id, &info), GR_ERR_NONE);
    assert_int_not_equal(info.pending, -1); /* written, not reported yet: never inside the append hook */
    int64_t pid = info.producer_id;
    assert_int_equal(answered, -1);
    hold(f); /* committed (the visible offset is the log end here): reported from the timer */
    assert_int_equal(answered, GR_ERR_NONE); /* the waiter's answer hook ran (no request: none finished) */
    assert_int_equal(gr_txn_describe(f->b->txn, id, &info), GR_ERR_NONE);
    assert_int_equal(info.pending, -1);
    assert_int_equal(info.state, GR_TXN_EMPTY);
    assert_int_equal(info.producer_id, pid);
    assert_int_equal(info.producer_epoch, 0);

    /* a new start: epoch 2, the record replayed */
    gr_txns_stop(f->b);
    assert_null(f->b->txn);
    assert_int_equal(gr_txns_start(f->b), 0);
    until_loaded(f);
    assert_int_equal(gr_txns_epoch(f->b), 2);
    assert_int_equal(epoch_file(f), 2);
    assert_int_equal(gr_txn_describe(f->b->txn, id, &info), GR_ERR_NONE);
    assert_int_equal(info.state, GR_TXN_EMPTY);
    assert_int_equal(info.producer_id, pid);
}

/* AddOffsetsToTxn adds the group's partition over the actual partition count of __consumer_offsets (made
 * with 3 partitions here, before offsets.topic.num.partitions changed to 50), as the group coordinator maps
 * groups: Kafka's TransactionCoordinator asks groupCoordinator.partitionFor. */
static void test_add_offsets_actual_partition_count(void **state)
{
    struct fx *f = *state;
    f->b->cfg.settings.offsets_topic_num_partitions = 3;
    assert_int_equal(gr_groups_ensure(f->b), 0);          /* __consumer_offsets made with 3 partitions */
    f->b->cfg.settings.offsets_topic_num_partitions = 50; /* the setting changed afterwards */
    struct gr_str group = gr_str_c("g");
    int32_t actual = gr_coord_partition_for(group, 3);
    assert_int_not_equal(actual, gr_coord_partition_for(group, 50)); /* the two mappings differ for "g" */
    assert_int_equal(gr_groups_partition_for(f->b, group), actual);
    assert_int_equal(gr_producer_ids_start(f->b), 0);
    struct gr_req *req = find_coordinator(f, 1, "tx");
    assert_true(gr_txns_defer(req));
    until_loaded(f);
    struct gr_str id = gr_str_c("tx-o");
    int16_t answered = -1;
    struct gr_txns_waiter waiter = {.answer = record_answer, .ctx = &answered};
    gr_txn_init_producer_id(f->b->txn, &waiter, id, 60000, -1, -1);
    hold(f);
    assert_int_equal(answered, GR_ERR_NONE);
    struct gr_txn_info info;
    assert_int_equal(gr_txn_describe(f->b->txn, id, &info), GR_ERR_NONE);
    answered = -1;
    waiter = (struct gr_txns_waiter){.answer = record_answer, .ctx = &answered};
    gr_txn_add_offsets(f->b->txn, &waiter, id, info.producer_id, info.producer_epoch, group);
    hold(f);
    assert_int_equal(answered, GR_ERR_NONE);
    struct gr_txn_tp tp;
    assert_int_equal(gr_txn_partitions(f->b->txn, id, &tp, 1), 1);
    assert_true(tp.topic.len == (int32_t)strlen("__consumer_offsets") &&
                memcmp(tp.topic.ptr, "__consumer_offsets", (size_t)tp.topic.len) == 0);
    assert_int_equal(tp.partition, actual);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_lookup_creates_and_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_committed_and_replayed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_add_offsets_actual_partition_count, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
