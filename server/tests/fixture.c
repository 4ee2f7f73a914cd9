/*
 * fixture.c: the server unit tests' broker (see fixture.h): set up and taken down as main.c does, minus
 * the network. Assertions are cmocka's, so a failed set-up fails the test that asked for it.
 * Read next: server/main.c (the real order), server/tests/test_produce_timestamps.c (a user).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cluster/local.h"
#include "server/groups.h"
#include "server/metrics.h"
#include "server/producer_ids.h"
#include "server/txns.h"
#include "server/handlers/handlers.h"
#include "server/tests/fixture.h"
#include "storage/tests/helpers.h"

void gr_broker_init_watchers(struct gr_broker *b);
void gr_broker_on_flushed(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err);

struct gr_broker *srv_broker_open(char *dir, size_t cap, const struct srv_broker_opts *opts)
{
    if (!opts->reuse_dir) th_tmpdir(dir, cap);
    struct gr_broker *b = calloc(1, sizeof *b);
    assert_non_null(b);
    gr_config_init(&b->cfg);
    b->loop = ev_loop_new(EVFLAG_AUTO);
    b->node_id = opts->node_id;
    gr_broker_init_watchers(b);
    struct gr_store_config sc;
    th_config(&sc, dir);
    if (opts->open_segment_fds_max) sc.open_segment_fds_max = opts->open_segment_fds_max;
    b->image = gr_image_new(b->node_id); /* the single-node image, as main.c makes it */
    assert_non_null(b->image);
    sc.on_topic_changed = gr_image_local_on_topic;
    sc.on_topic_changed_ctx = b->image;
    if (opts->on_flushed) {
        sc.on_flushed = gr_broker_on_flushed;
        sc.on_flushed_ctx = b;
    }
    assert_int_equal(gr_store_open(&sc, &b->store), 0);
    /* one PLAINTEXT listener (no socket): what requests without a connection came in on */
    snprintf(b->listeners[0].name, sizeof b->listeners[0].name, "PLAINTEXT");
    b->listeners[0].fd = -1;
    b->listener_count = 1;
    assert_int_equal(gr_broker_image_load(b), 0);
    b->topic_writer = gr_topic_writer_local_new(&b->store, &b->iopool); /* as main.c makes it */
    assert_non_null(b->topic_writer);
    b->parts = gr_partitions_create(&(struct gr_partitions_config){b->store, opts->hwm_durable});
    assert_non_null(b->parts);
    if (opts->iopool) assert_int_equal(gr_iopool_create(2, NULL, NULL, &b->iopool), 0);
    return b;
}

void srv_broker_close(struct gr_broker *b, const char *dir, void (*after_store_close)(void))
{
    if (b->iopool) gr_iopool_destroy(b->iopool);
    b->iopool = NULL;
    gr_groups_stop(b);
    gr_txns_stop(b);
    while (b->parked_head)
        gr_req_free(b->parked_head);
    gr_producer_ids_stop(b);
    gr_store_close(b->store);
    gr_image_free(b->image);
    gr_topic_writer_free(b->topic_writer);
    if (after_store_close) after_store_close();
    ev_loop_destroy(b->loop);
    gr_config_free(&b->cfg);
    gr_partitions_destroy(b->parts); /* as main.c does at shutdown */
    gr_metrics_free(&b->metrics);    /* per-topic counters made by the handlers (main.c frees them too) */
    free(b->flushed);                /* completions queued for a loop the test did not run */
    free(b);
    if (dir) th_rmtree(dir);
}

struct gr_req *srv_req_new(struct gr_broker *b, int16_t api_key, int16_t api_version, size_t arena_bytes)
{
    struct gr_req *req = calloc(1, sizeof *req);
    assert_non_null(req);
    req->broker = b;
    gr_arena_init(&req->arena, arena_bytes);
    req->hdr.request_api_key = api_key;
    req->hdr.request_api_version = api_version;
    return req;
}
