/*
 * test_feed.c: the feed (cluster/feed.h) alone, with hand-made batches whose values are encoded by
 * cluster/values.h: a snapshot in key order (partition states before their topic records) builds brokers,
 * the controller and topics; a second snapshot replaces everything; watch events update, delete and keep a
 * state pending until its topic arrives; a malformed value changes nothing; one observer call per batch.
 * Read next: cluster/feed.h.
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

#include "cluster/feed.h"
#include "cluster/values.h"

static struct gr_cluster_layout lay;
static int changes;

static void on_change(void *ctx, struct gr_image *img)
{
    (void)ctx;
    (void)img;
    changes++;
}

static struct gr_uuid tid(int n)
{
    struct gr_uuid u = {{0}};
    u.b[0] = 0x11;
    u.b[1] = (uint8_t)n;
    u.b[15] = 0x7;
    return u;
}

/* Applies key = value (value NULL: a deletion) at revisions (create, mod); returns gr_feed_apply's code. */
static int put(struct gr_feed *f, const char *key, char *value, int64_t create, int64_t mod)
{
    struct gr_feed_kv kv = {key, strlen(key), value, value ? strlen(value) : 0, create, mod, value == NULL};
    int rc = gr_feed_apply(f, &kv);
    free(value);
    return rc;
}

static char *broker_value(int32_t node, const char *rack)
{
    struct gr_cluster_broker b = {.node_id = node, .listener_count = 2};
    snprintf(b.listeners[0].name, sizeof b.listeners[0].name, "INTERNAL");
    snprintf(b.listeners[0].host, sizeof b.listeners[0].host, "10.0.0.%d", node);
    b.listeners[0].port = 9093;
    snprintf(b.listeners[1].name, sizeof b.listeners[1].name, "EXTERNAL");
    snprintf(b.listeners[1].host, sizeof b.listeners[1].host, "127.0.0.%d", node);
    b.listeners[1].port = 9092;
    if (rack) {
        b.has_rack = true;
        snprintf(b.rack, sizeof b.rack, "%s", rack);
    }
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    assert_int_equal(gr_cluster_broker_encode(&b, &out, &len, err), 0);
    return out;
}

static char *topic_value(int n, int32_t parts, int32_t first_replica)
{
    struct gr_cluster_topic t = {.topic_id = tid(n), .partition_count = parts};
    t.partitions = calloc((size_t)parts, sizeof *t.partitions);
    for (int32_t p = 0; p < parts; p++) {
        t.partitions[p].replica_count = 1;
        t.partitions[p].replicas[0] = first_replica + p % 3;
    }
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), 0);
    free(t.partitions);
    return out;
}

static char *state_value(int32_t leader, int32_t epoch)
{
    struct gr_cluster_partition s = {.leader = leader, .leader_epoch = epoch, .controller_epoch = 5};
    if (leader >= 0) s.isr[s.isr_count++] = leader;
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    assert_int_equal(gr_cluster_partition_encode(&s, &out, &len, err), 0);
    return out;
}

static char *controller_value(int32_t node)
{
    struct gr_cluster_controller c = {.node_id = node, .broker_epoch = 3};
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    assert_int_equal(gr_cluster_controller_encode(&c, &out, &len, err), 0);
    return out;
}

static const char *bkey(int32_t node)
{
    static char k[GR_CLUSTER_KEY_BUF];
    assert_true(gr_cluster_key_broker(&lay, node, k) > 0);
    return k;
}
static const char *tkey(const char *name)
{
    static char k[GR_CLUSTER_KEY_BUF];
    assert_true(gr_cluster_key_topic(&lay, name, strlen(name), k) > 0);
    return k;
}
static const char *pkey(int n, int32_t p)
{
    static char k[GR_CLUSTER_KEY_BUF];
    assert_true(gr_cluster_key_partition(&lay, tid(n), p, k) > 0);
    return k;
}
static const char *ckey(void)
{
    static char k[GR_CLUSTER_KEY_BUF];
    assert_true(gr_cluster_key_controller(&lay, k) > 0);
    return k;
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(gr_cluster_layout_init(&lay, "/gregor", "AAAAAAAAAAAAAAAAAAAAAQ"), 0);
    changes = 0;
    return 0;
}

/* A snapshot in key order: states first, then topics; brokers, controller. */
static void snapshot1(struct gr_feed *f)
{
    gr_feed_snapshot_begin(f);
    assert_int_equal(put(f, bkey(1), broker_value(1, "r1"), 10, 10), 0);
    assert_int_equal(put(f, bkey(2), broker_value(2, NULL), 12, 12), 0);
    assert_int_equal(put(f, bkey(3), broker_value(3, NULL), 14, 14), 0);
    assert_int_equal(put(f, ckey(), controller_value(2), 20, 20), 0);
    assert_int_equal(put(f, pkey(1, 0), state_value(1, 0), 31, 31), 0);
    assert_int_equal(put(f, pkey(1, 10), state_value(2, 4), 31, 41), 0); /* "10" sorts before "2" */
    assert_int_equal(put(f, pkey(1, 2), state_value(3, 0), 31, 33), 0);
    assert_int_equal(put(f, pkey(9, 0), state_value(1, 0), 50, 50), 0); /* no topic record: stays pending */
    assert_int_equal(gr_feed_pending(f), 4);
    assert_int_equal(put(f, tkey("__consumer_offsets"), topic_value(2, 3, 1), 25, 26), 0);
    assert_int_equal(put(f, tkey("orders"), topic_value(1, 12, 1), 30, 30), 0);
    assert_int_equal(gr_feed_pending(f), 1);
    gr_feed_commit(f, 60);
}

/* Both coordinators' topics are internal (Kafka's Topic.isInternal); an ordinary topic is not. */
static void test_internal_topics(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    struct gr_feed *f = gr_feed_new(img, &lay, NULL, NULL);
    gr_feed_snapshot_begin(f);
    assert_int_equal(put(f, bkey(1), broker_value(1, NULL), 10, 10), 0);
    assert_int_equal(put(f, tkey("__transaction_state"), topic_value(3, 2, 1), 20, 20), 0);
    assert_int_equal(put(f, tkey("__transaction_statf"), topic_value(4, 1, 1), 21, 21), 0);
    gr_feed_commit(f, 30);
    struct gr_image_topic *ts = gr_image_topic_find(img, "__transaction_state", 19);
    assert_non_null(ts);
    assert_true(ts->internal);
    struct gr_image_topic *other = gr_image_topic_find(img, "__transaction_statf", 19);
    assert_non_null(other);
    assert_false(other->internal);
    gr_feed_free(f);
    gr_image_free(img);
}

static void test_snapshot(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    gr_image_observe(img, on_change, NULL);
    struct gr_feed *f = gr_feed_new(img, &lay, NULL, NULL);
    snapshot1(f);
    assert_int_equal(changes, 1);
    assert_int_equal(img->revision, 60);
    assert_int_equal(gr_image_broker_count(img), 3);
    const struct gr_image_broker *b1 = gr_image_broker(img, 1);
    assert_int_equal(b1->epoch, 10);
    assert_true(b1->has_rack);
    assert_string_equal(b1->rack, "r1");
    assert_int_equal(b1->listener_count, 2);
    const struct gr_image_listener *l = gr_image_broker_listener(b1, "EXTERNAL", 8);
    assert_non_null(l);
    assert_string_equal(l->host, "127.0.0.1");
    assert_int_equal(l->port, 9092);
    assert_false(gr_image_broker(img, 2)->has_rack);
    assert_int_equal(img->controller_id, 2);
    assert_int_equal(img->controller_epoch, 20);

    struct gr_image_topic *t = gr_image_topic_find(img, "orders", 6);
    assert_non_null(t);
    assert_false(t->internal);
    assert_int_equal(t->partition_count, 12);
    assert_int_equal(t->record_revision, 30);
    const struct gr_image_partition *p0 = gr_image_partition(t, 0);
    assert_int_equal(p0->leader, 1);
    assert_int_equal(p0->leader_epoch, 0);
    assert_int_equal(p0->partition_epoch, 31);
    assert_int_equal(p0->replica_count, 1);
    assert_int_equal(gr_image_replicas(p0)[0], 1);
    assert_int_equal(p0->isr_count, 1);
    const struct gr_image_partition *p10 = gr_image_partition(t, 10);
    assert_int_equal(p10->leader, 2);
    assert_int_equal(p10->leader_epoch, 4);
    assert_int_equal(p10->partition_epoch, 41);
    assert_int_equal(gr_image_replicas(p10)[0], 2); /* 1 + 10 % 3 */
    assert_int_equal(gr_image_partition(t, 2)->leader, 3);
    const struct gr_image_partition *p5 = gr_image_partition(t, 5); /* no state yet */
    assert_int_equal(p5->leader, -1);
    assert_int_equal(p5->partition_epoch, 0);
    assert_int_equal(gr_image_replicas(p5)[0], 3);
    struct gr_image_topic *co = gr_image_topic_find(img, "__consumer_offsets", 18);
    assert_non_null(co);
    assert_true(co->internal);
    assert_int_equal(co->partition_count, 3);

    /* a second snapshot replaces everything: broker 3, the controller and orders are gone */
    gr_feed_snapshot_begin(f);
    assert_int_equal(put(f, bkey(1), broker_value(1, NULL), 70, 70), 0);
    assert_int_equal(put(f, tkey("__consumer_offsets"), topic_value(2, 3, 1), 25, 26), 0);
    gr_feed_commit(f, 80);
    assert_int_equal(changes, 2);
    assert_int_equal(gr_image_broker_count(img), 1);
    assert_int_equal(gr_image_broker(img, 1)->epoch, 70);
    assert_int_equal(img->controller_id, -1);
    assert_int_equal(img->controller_epoch, 0);
    assert_null(gr_image_topic_find(img, "orders", 6));
    assert_int_equal(gr_image_topic_count(img), 1);
    assert_int_equal(gr_feed_pending(f), 0);
    assert_int_equal(img->revision, 80);
    gr_feed_free(f);
    gr_image_free(img);
}

static void test_events(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    gr_image_observe(img, on_change, NULL);
    struct gr_feed *f = gr_feed_new(img, &lay, NULL, NULL);
    snapshot1(f);
    /* a new leader for orders-0, broker 3 leaves, the controller goes */
    assert_int_equal(put(f, pkey(1, 0), state_value(2, 1), 31, 61), 0);
    assert_int_equal(put(f, bkey(3), NULL, 0, 62), 0);
    assert_int_equal(put(f, ckey(), NULL, 0, 63), 0);
    gr_feed_commit(f, 63);
    assert_int_equal(changes, 2);
    struct gr_image_topic *t = gr_image_topic_find(img, "orders", 6);
    assert_int_equal(gr_image_partition(t, 0)->leader, 2);
    assert_int_equal(gr_image_partition(t, 0)->leader_epoch, 1);
    assert_int_equal(gr_image_partition(t, 0)->partition_epoch, 61);
    assert_null(gr_image_broker(img, 3));
    assert_int_equal(img->controller_id, -1);

    /* topic 9's pending state meets its record now; a state of topic 7 before its record, then its record */
    assert_int_equal(put(f, pkey(7, 1), state_value(3, 2), 64, 64), 0);
    assert_int_equal(put(f, pkey(7, 1), state_value(3, 3), 64, 65), 0); /* replaces the pending one */
    assert_int_equal(gr_feed_pending(f), 2);
    assert_int_equal(put(f, tkey("t9"), topic_value(9, 1, 1), 66, 66), 0);
    assert_int_equal(put(f, tkey("t7"), topic_value(7, 2, 2), 67, 67), 0);
    gr_feed_commit(f, 67);
    assert_int_equal(gr_feed_pending(f), 0);
    assert_int_equal(gr_image_partition(gr_image_topic_find(img, "t9", 2), 0)->leader, 1);
    const struct gr_image_partition *p = gr_image_partition(gr_image_topic_find(img, "t7", 2), 1);
    assert_int_equal(p->leader, 3);
    assert_int_equal(p->leader_epoch, 3);
    assert_int_equal(p->partition_epoch, 65);

    /* orders grows to 14: states and replicas kept, new partitions without a leader */
    assert_int_equal(put(f, tkey("orders"), topic_value(1, 14, 1), 30, 68), 0);
    t = gr_image_topic_find(img, "orders", 6);
    assert_int_equal(t->partition_count, 14);
    assert_int_equal(t->record_revision, 68);
    assert_int_equal(gr_image_partition(t, 0)->leader, 2);
    assert_int_equal(gr_image_partition(t, 13)->leader, -1);
    /* a state deleted: offline with no epoch; the topic deleted: gone */
    assert_int_equal(put(f, pkey(1, 2), NULL, 0, 69), 0);
    assert_int_equal(gr_image_partition(t, 2)->leader, -1);
    assert_int_equal(put(f, tkey("orders"), NULL, 0, 70), 0);
    gr_feed_commit(f, 70);
    assert_null(gr_image_topic_find(img, "orders", 6));
    assert_int_equal(img->revision, 70);
    /* deleted and re-created under its name with a new id: the old one is replaced */
    assert_int_equal(put(f, tkey("t9"), topic_value(10, 2, 1), 71, 71), 0);
    assert_int_equal(gr_image_topic_find(img, "t9", 2)->id[1], 10);
    assert_null(gr_image_topic_find_id(img, tid(9).b));
    gr_feed_free(f);
    gr_image_free(img);
}

static void test_malformed(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    struct gr_feed *f = gr_feed_new(img, &lay, NULL, NULL);
    snapshot1(f);
    /* bad JSON, a value of the wrong kind, a broker whose node_id differs from its key, a shrink */
    assert_int_equal(put(f, bkey(1), strdup("{\"version\":1,"), 90, 90), -EINVAL);
    assert_int_equal(put(f, bkey(2), state_value(1, 0), 91, 91), -EINVAL);
    assert_int_equal(put(f, bkey(3), broker_value(4, NULL), 92, 92), -EINVAL);
    assert_int_equal(put(f, tkey("orders"), topic_value(1, 2, 1), 30, 93), -EINVAL);
    assert_int_equal(put(f, tkey("other"), topic_value(1, 2, 1), 94, 94), -EINVAL); /* id of "orders" */
    assert_int_equal(put(f, pkey(1, 0), strdup("{\"version\":1,\"leader\":-2}"), 31, 95), -EINVAL);
    assert_int_equal(put(f, "/gregor/AAAAAAAAAAAAAAAAAAAAAQ/brokers/01", strdup("{}"), 96, 96), -EINVAL);
    /* unknown kinds of key and the producer id counter: ignored, not errors */
    assert_int_equal(put(f, "/gregor/AAAAAAAAAAAAAAAAAAAAAQ/future/x", strdup("{}"), 97, 97), 0);
    gr_feed_commit(f, 97);
    assert_int_equal(gr_image_broker(img, 1)->epoch, 10);
    assert_int_equal(gr_image_broker(img, 2)->epoch, 12);
    assert_int_equal(gr_image_broker(img, 3)->epoch, 14);
    assert_null(gr_image_broker(img, 4));
    struct gr_image_topic *t = gr_image_topic_find(img, "orders", 6);
    assert_int_equal(t->partition_count, 12);
    assert_int_equal(t->record_revision, 30);
    assert_null(gr_image_topic_find(img, "other", 5));
    assert_int_equal(gr_image_partition(t, 0)->leader, 1);
    assert_int_equal(gr_image_partition(t, 0)->partition_epoch, 31);
    gr_feed_free(f);
    gr_image_free(img);
}

/* The features key (issue #25): the transaction.version level and its mod_revision as the epoch; a key
 * without it is level 0; a malformed one changes nothing; a deletion makes the epoch unknown. */
static void test_features(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    struct gr_feed *f = gr_feed_new(img, &lay, NULL, NULL);
    char key[GR_CLUSTER_KEY_BUF];
    assert_true(gr_cluster_key_features(&lay, key) > 0);
    assert_int_equal(img->features_epoch, -1);
    assert_int_equal(put(f, key, strdup("{\"version\":1,\"features\":{\"transaction.version\":1}}"), 5, 5),
                     0);
    assert_int_equal(img->transaction_version, 1);
    assert_int_equal(img->features_epoch, 5);
    assert_int_equal(put(f, key, strdup("{\"version\":1,\"features\":{\"x\":3}}"), 5, 9), 0);
    assert_int_equal(img->transaction_version, 0);
    assert_int_equal(img->features_epoch, 9);
    assert_int_equal(put(f, key, strdup("{\"version\":1,\"features\":[]}"), 5, 11), -EINVAL);
    assert_int_equal(img->features_epoch, 9);
    assert_int_equal(put(f, key, NULL, 5, 12), 0);
    assert_int_equal(img->features_epoch, -1);
    gr_feed_free(f);
    gr_image_free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_snapshot, setup), cmocka_unit_test_setup(test_internal_topics, setup),
        cmocka_unit_test_setup(test_events, setup),   cmocka_unit_test_setup(test_malformed, setup),
        cmocka_unit_test_setup(test_features, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
