/*
 * test_image.c: the metadata image (cluster/image.h) alone: broker and topic mutators, lookups by name and
 * by id, order, bounds refused with the image unchanged, removal, and a topic re-created under its name with
 * a new id. Read next: cluster/image.h.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/image.h"

static void id_of(uint8_t id[16], int n)
{
    memset(id, 0, 16);
    id[0] = (uint8_t)(n >> 8);
    id[1] = (uint8_t)n;
    id[15] = 0x5a;
}

static struct gr_image_broker broker(int32_t node_id, const char *rack)
{
    struct gr_image_broker br = {.node_id = node_id, .epoch = 100 + node_id, .listener_count = 2};
    if (rack) {
        br.has_rack = true;
        snprintf(br.rack, sizeof br.rack, "%s", rack);
    }
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "10.0.0.%d", node_id);
    br.listeners[0].port = 9093;
    snprintf(br.listeners[1].name, sizeof br.listeners[1].name, "EXTERNAL");
    snprintf(br.listeners[1].host, sizeof br.listeners[1].host, "b%d.example", node_id);
    br.listeners[1].port = 9092;
    return br;
}

static void test_brokers(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(2);
    assert_non_null(img);
    assert_int_equal(img->node_id, 2);
    assert_int_equal(img->controller_id, -1);
    struct gr_image_broker b3 = broker(3, "r2"), b1 = broker(1, NULL), b2 = broker(2, "r1");
    assert_int_equal(gr_image_set_broker(img, &b3), 0);
    assert_int_equal(gr_image_set_broker(img, &b1), 0);
    assert_int_equal(gr_image_set_broker(img, &b2), 0);
    assert_int_equal(gr_image_broker_count(img), 3);
    for (int32_t i = 0; i < 3; i++) /* node id order */
        assert_int_equal(gr_image_broker_at(img, i)->node_id, i + 1);
    const struct gr_image_broker *got = gr_image_broker(img, 3);
    assert_non_null(got);
    assert_string_equal(got->rack, "r2");
    assert_int_equal(got->epoch, 103);
    const struct gr_image_listener *l = gr_image_broker_listener(got, "EXTERNAL", 8);
    assert_non_null(l);
    assert_string_equal(l->host, "b3.example");
    assert_int_equal(l->port, 9092);
    assert_null(gr_image_broker_listener(got, "EXTERNAL", 7)); /* "EXTERNA" */
    assert_null(gr_image_broker_listener(got, "PLAINTEXT", 9));
    assert_false(gr_image_broker(img, 1)->has_rack);
    /* replace: same node id, new epoch, fenced */
    b3.epoch = 500;
    b3.fenced = true;
    assert_int_equal(gr_image_set_broker(img, &b3), 0);
    assert_int_equal(gr_image_broker_count(img), 3);
    assert_int_equal(gr_image_broker(img, 3)->epoch, 500);
    assert_true(gr_image_broker(img, 3)->fenced);
    assert_true(gr_image_remove_broker(img, 2));
    assert_false(gr_image_remove_broker(img, 2));
    assert_null(gr_image_broker(img, 2));
    assert_int_equal(gr_image_broker_count(img), 2);
    assert_int_equal(gr_image_broker_at(img, 1)->node_id, 3);
    gr_image_set_controller(img, 3);
    assert_int_equal(img->controller_id, 3);
    gr_image_set_controller(img, -7);
    assert_int_equal(img->controller_id, -1);
    gr_image_free(img);
}

static void test_broker_bounds(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    struct gr_image_broker br = broker(-1, NULL);
    assert_int_equal(gr_image_set_broker(img, &br), -EINVAL); /* node id */
    br = broker(1, NULL);
    br.listener_count = GR_LISTENERS_MAX + 1;
    assert_int_equal(gr_image_set_broker(img, &br), -EINVAL);
    br = broker(1, NULL);
    br.listeners[1].port = 65536;
    assert_int_equal(gr_image_set_broker(img, &br), -EINVAL);
    br = broker(1, NULL);
    memset(br.listeners[0].host, 'h', sizeof br.listeners[0].host); /* no NUL inside */
    assert_int_equal(gr_image_set_broker(img, &br), -EINVAL);
    br = broker(1, "r");
    memset(br.rack, 'r', sizeof br.rack);
    assert_int_equal(gr_image_set_broker(img, &br), -EINVAL);
    br = broker(1, NULL);
    snprintf(br.listeners[1].name, sizeof br.listeners[1].name, "INTERNAL"); /* a name twice */
    assert_int_equal(gr_image_set_broker(img, &br), -EINVAL);
    br = broker(1, NULL);
    br.listeners[0].name[0] = '\0';
    assert_int_equal(gr_image_set_broker(img, &br), -EINVAL);
    assert_int_equal(gr_image_broker_count(img), 0); /* nothing changed */
    for (int32_t i = 0; i < GR_IMAGE_BROKERS_MAX; i++) {
        br = broker(i, NULL);
        assert_int_equal(gr_image_set_broker(img, &br), 0);
    }
    br = broker(GR_IMAGE_BROKERS_MAX, NULL);
    assert_int_equal(gr_image_set_broker(img, &br), -ENOSPC);
    br = broker(5, "again"); /* a replacement still fits */
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_image_broker_count(img), GR_IMAGE_BROKERS_MAX);
    assert_string_equal(gr_image_broker(img, 5)->rack, "again");
    assert_int_equal(gr_image_set_cluster_id(img, ""), -EINVAL);
    char longid[GR_CLUSTER_ID_BYTES_MAX + 2];
    memset(longid, 'c', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    assert_int_equal(gr_image_set_cluster_id(img, longid), -EINVAL);
    assert_int_equal(gr_image_set_cluster_id(img, "MkU3OEVBNTcwNTJENDM2Qk"), 0);
    assert_string_equal(img->cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
    gr_image_free(img);
}

static void test_topics(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    uint8_t ida[16], idb[16], idc[16];
    id_of(ida, 1);
    id_of(idb, 2);
    id_of(idc, 3);
    struct gr_image_topic *a, *b, *c;
    assert_int_equal(gr_image_put_topic(img, "beta", 4, idb, false, 3, NULL, &b), 0);
    assert_int_equal(gr_image_put_topic(img, "alpha", 5, ida, false, 1, NULL, &a), 0);
    assert_int_equal(gr_image_put_topic(img, "__consumer_offsets", 18, idc, true, 50, NULL, &c), 0);
    assert_int_equal(gr_image_topic_count(img), 3);
    assert_int_equal(gr_image_partition_total(img), 54);
    assert_ptr_equal(gr_image_topic_at(img, 0), c); /* bytewise: '_' < 'a' */
    assert_ptr_equal(gr_image_topic_at(img, 1), a);
    assert_ptr_equal(gr_image_topic_at(img, 2), b);
    assert_ptr_equal(gr_image_topic_find(img, "beta", 4), b);
    assert_ptr_equal(gr_image_topic_find(img, "betax", 4), b); /* a view of 4 bytes */
    assert_null(gr_image_topic_find(img, "bet", 3));
    assert_ptr_equal(gr_image_topic_find_id(img, ida), a);
    uint8_t unknown[16];
    id_of(unknown, 9);
    assert_null(gr_image_topic_find_id(img, unknown));
    assert_true(c->internal);
    assert_int_equal(b->partition_count, 3);
    /* new partitions: no leader, epoch -1, no replicas */
    const struct gr_image_partition *p = gr_image_partition(b, 2);
    assert_non_null(p);
    assert_int_equal(p->leader, -1);
    assert_int_equal(p->leader_epoch, -1);
    assert_int_equal(p->replica_count, 0);
    assert_null(gr_image_partition(b, 3));
    assert_null(gr_image_partition(b, -1));
    /* partition state, inline (3 nodes) and on the heap (more) */
    int32_t r1[] = {2}, r3[] = {2, 3, 1}, isr[] = {2, 3}, off[] = {1};
    struct gr_image_partition_state st = {
        .leader = 2, .leader_epoch = 7, .replicas = r1, .replica_count = 1, .isr = r1, .isr_count = 1};
    assert_int_equal(gr_image_set_partition(img, b, 0, &st), 0);
    st = (struct gr_image_partition_state){.leader = 3,
                                           .leader_epoch = 9,
                                           .replicas = r3,
                                           .replica_count = 3,
                                           .isr = isr,
                                           .isr_count = 2,
                                           .offline = off,
                                           .offline_count = 1};
    assert_int_equal(gr_image_set_partition(img, b, 1, &st), 0);
    p = gr_image_partition(b, 1);
    assert_int_equal(p->leader, 3);
    assert_int_equal(p->leader_epoch, 9);
    assert_int_equal(p->replica_count, 3);
    assert_memory_equal(gr_image_replicas(p), r3, sizeof r3);
    assert_int_equal(p->isr_count, 2);
    assert_memory_equal(gr_image_isr(p), isr, sizeof isr);
    assert_int_equal(p->offline_count, 1);
    assert_int_equal(gr_image_offline(p)[0], 1);
    /* grow keeps the states (and the inline arrays' contents) */
    assert_int_equal(gr_image_put_topic(img, "beta", 4, idb, false, 5, NULL, NULL), 0);
    assert_int_equal(b->partition_count, 5);
    assert_int_equal(gr_image_partition_total(img), 56);
    p = gr_image_partition(b, 0);
    assert_int_equal(p->leader, 2);
    assert_int_equal(gr_image_replicas(p)[0], 2);
    assert_int_equal(gr_image_isr(p)[0], 2);
    assert_memory_equal(gr_image_replicas(gr_image_partition(b, 1)), r3, sizeof r3);
    assert_int_equal(gr_image_partition(b, 4)->leader, -1);
    /* a shrink, and the id under another name, are refused */
    assert_int_equal(gr_image_put_topic(img, "beta", 4, idb, false, 2, NULL, NULL), -EINVAL);
    assert_int_equal(gr_image_put_topic(img, "gamma", 5, idb, false, 5, NULL, NULL), -EINVAL);
    assert_int_equal(b->partition_count, 5);
    /* removal */
    assert_true(gr_image_remove_topic(img, ida));
    assert_false(gr_image_remove_topic(img, ida));
    assert_null(gr_image_topic_find(img, "alpha", 5));
    assert_null(gr_image_topic_find_id(img, ida));
    assert_int_equal(gr_image_topic_count(img), 2);
    assert_int_equal(gr_image_partition_total(img), 55);
    assert_ptr_equal(gr_image_topic_at(img, 1), b);
    gr_image_free(img);
}

static void test_recreate_same_name(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    uint8_t old_id[16], new_id[16];
    id_of(old_id, 10);
    id_of(new_id, 11);
    struct gr_image_topic *t;
    assert_int_equal(gr_image_put_topic(img, "orders", 6, old_id, false, 12, NULL, &t), 0);
    int32_t r[] = {1};
    struct gr_image_partition_state st = {
        .leader = 1, .leader_epoch = 4, .replicas = r, .replica_count = 1, .isr = r, .isr_count = 1};
    assert_int_equal(gr_image_set_partition(img, t, 3, &st), 0);
    /* deleted and created again with a new id: the old topic and its states are gone */
    assert_int_equal(gr_image_put_topic(img, "orders", 6, new_id, false, 2, NULL, &t), 0);
    assert_int_equal(gr_image_topic_count(img), 1);
    assert_int_equal(gr_image_partition_total(img), 2);
    assert_null(gr_image_topic_find_id(img, old_id));
    assert_ptr_equal(gr_image_topic_find_id(img, new_id), t);
    assert_ptr_equal(gr_image_topic_find(img, "orders", 6), t);
    assert_int_equal(t->partition_count, 2);
    assert_int_equal(gr_image_partition(t, 0)->leader, -1);
    assert_memory_equal(t->id, new_id, 16);
    gr_image_free(img);
}

static void test_topic_bounds(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    uint8_t id[16], zero[16] = {0};
    id_of(id, 1);
    char longname[GR_TOPIC_NAME_BYTES_MAX + 1];
    memset(longname, 'n', sizeof longname);
    assert_int_equal(gr_image_put_topic(img, longname, sizeof longname, id, false, 1, NULL, NULL), -EINVAL);
    assert_int_equal(gr_image_put_topic(img, "t", 0, id, false, 1, NULL, NULL), -EINVAL);
    assert_int_equal(gr_image_put_topic(img, "t", 1, zero, false, 1, NULL, NULL), -EINVAL);
    assert_int_equal(gr_image_put_topic(img, "t", 1, id, false, 0, NULL, NULL), -EINVAL);
    assert_int_equal(gr_image_put_topic(img, "t", 1, id, false, GR_PARTITIONS_PER_TOPIC_MAX + 1, NULL, NULL),
                     -EINVAL);
    assert_int_equal(gr_image_topic_count(img), 0);
    assert_int_equal(gr_image_put_topic(img, longname, GR_TOPIC_NAME_BYTES_MAX, id, false, 1, NULL, NULL), 0);
    struct gr_image_topic *t = gr_image_topic_find(img, longname, GR_TOPIC_NAME_BYTES_MAX);
    assert_non_null(t);
    int32_t many[GR_IMAGE_REPLICAS_MAX + 1];
    for (int i = 0; i <= GR_IMAGE_REPLICAS_MAX; i++)
        many[i] = i;
    struct gr_image_partition_state st = {
        .leader = 0, .replicas = many, .replica_count = GR_IMAGE_REPLICAS_MAX + 1};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), -EINVAL);
    st.replica_count = GR_IMAGE_REPLICAS_MAX; /* the most, on the heap */
    st.isr = many;
    st.isr_count = GR_IMAGE_REPLICAS_MAX;
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), 0);
    assert_int_equal(gr_image_isr(gr_image_partition(t, 0))[GR_IMAGE_REPLICAS_MAX - 1],
                     GR_IMAGE_REPLICAS_MAX - 1);
    int32_t neg[] = {-1};
    st = (struct gr_image_partition_state){.leader = 0, .replicas = neg, .replica_count = 1};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), -EINVAL);
    st = (struct gr_image_partition_state){.leader = -2};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), -EINVAL);
    st = (struct gr_image_partition_state){.leader = 0};
    assert_int_equal(gr_image_set_partition(img, t, 1, &st), -EINVAL);                /* out of range */
    assert_int_equal(gr_image_partition(t, 0)->replica_count, GR_IMAGE_REPLICAS_MAX); /* unchanged */
    /* the partition total: GR_IMAGE_PARTITIONS_MAX across topics */
    int n = 1;
    int64_t left = GR_IMAGE_PARTITIONS_MAX - 1;
    while (left > 0) {
        int32_t k = left > GR_PARTITIONS_PER_TOPIC_MAX ? GR_PARTITIONS_PER_TOPIC_MAX : (int32_t)left;
        char name[16];
        snprintf(name, sizeof name, "p%d", n);
        id_of(id, ++n);
        assert_int_equal(gr_image_put_topic(img, name, strlen(name), id, false, k, NULL, NULL), 0);
        left -= k;
    }
    assert_int_equal(gr_image_partition_total(img), GR_IMAGE_PARTITIONS_MAX);
    id_of(id, ++n);
    assert_int_equal(gr_image_put_topic(img, "one-more", 8, id, false, 1, NULL, NULL), -ENOSPC);
    assert_null(gr_image_topic_find(img, "one-more", 8));
    gr_image_free(img);
}

/* Many topics: the hash tables grow and every topic is still found by name and by id. */
static void test_many_topics(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    enum { N = 5000 };
    for (int i = 0; i < N; i++) {
        char name[32];
        uint8_t id[16];
        snprintf(name, sizeof name, "topic-%05d", N - 1 - i);
        id_of(id, i + 1);
        assert_int_equal(gr_image_put_topic(img, name, strlen(name), id, false, 1, NULL, NULL), 0);
    }
    for (int i = 0; i < N; i += 7) {
        char name[32];
        uint8_t id[16];
        snprintf(name, sizeof name, "topic-%05d", N - 1 - i);
        id_of(id, i + 1);
        struct gr_image_topic *t = gr_image_topic_find(img, name, strlen(name));
        assert_non_null(t);
        assert_ptr_equal(gr_image_topic_find_id(img, id), t);
    }
    for (int i = 1; i < N; i++)
        assert_true(strcmp(gr_image_topic_at(img, i - 1)->name, gr_image_topic_at(img, i)->name) < 0);
    gr_image_free(img);
}

struct seen {
    int calls;
    int64_t revision;
};

static void observer(void *ctx, struct gr_image *img)
{
    struct seen *s = ctx;
    s->calls++;
    s->revision = img->revision;
}

static void self_removing(void *ctx, struct gr_image *img)
{
    observer(ctx, img);
    gr_image_unobserve(img, self_removing, ctx);
}

static void test_observers(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    assert_non_null(img);
    struct seen a = {0}, b = {0}, c[GR_IMAGE_OBSERVERS_MAX] = {{0}};
    assert_int_equal(gr_image_observe(img, observer, &a), 0);
    assert_int_equal(gr_image_observe(img, self_removing, &b), 0);
    img->revision = 42;
    gr_image_changed(img);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.revision, 42);
    assert_int_equal(b.calls, 1);
    gr_image_changed(img); /* b removed itself */
    assert_int_equal(a.calls, 2);
    assert_int_equal(b.calls, 1);
    for (int i = 1; i < GR_IMAGE_OBSERVERS_MAX; i++)
        assert_int_equal(gr_image_observe(img, observer, &c[i]), 0);
    assert_int_equal(gr_image_observe(img, observer, &c[0]), -ENOSPC);
    gr_image_unobserve(img, observer, &a);
    gr_image_unobserve(img, observer, &a); /* absent: nothing */
    gr_image_changed(img);
    assert_int_equal(a.calls, 2);
    assert_int_equal(c[GR_IMAGE_OBSERVERS_MAX - 1].calls, 1);
    gr_image_free(img);
}

static void test_partition_epoch(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    uint8_t id[16] = {1, 2, 3};
    struct gr_image_topic *t = NULL;
    assert_int_equal(gr_image_put_topic(img, "t", 1, id, false, 2, NULL, &t), 0);
    assert_int_equal(gr_image_partition(t, 1)->partition_epoch, 0); /* no state written yet */
    int32_t r[1] = {3};
    struct gr_image_partition_state st = {.leader = 3,
                                          .leader_epoch = 4,
                                          .partition_epoch = 977,
                                          .replicas = r,
                                          .replica_count = 1,
                                          .isr = r,
                                          .isr_count = 1};
    assert_int_equal(gr_image_set_partition(img, t, 1, &st), 0);
    assert_int_equal(gr_image_partition(t, 1)->partition_epoch, 977);
    assert_int_equal(gr_image_partition(t, 1)->leader_epoch, 4);
    assert_int_equal(gr_image_put_topic(img, "t", 1, id, false, 3, NULL, &t), 0); /* grown: kept */
    assert_int_equal(gr_image_partition(t, 1)->partition_epoch, 977);
    assert_int_equal(gr_image_partition(t, 2)->partition_epoch, 0);
    gr_image_free(img);
}

/* Topic configs: copied and sorted, looked up by name, kept by an update, gone with a re-created topic,
 * bounded (count, name and value lengths, duplicates), nothing changed on error. */
static void test_topic_configs(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    uint8_t id[16], id2[16];
    id_of(id, 20);
    id_of(id2, 21);
    struct gr_image_topic *t;
    assert_int_equal(gr_image_put_topic(img, "cfg", 3, id, false, 2, NULL, &t), 0);
    assert_int_equal(t->config_count, 0);
    assert_null(gr_image_topic_config(t, "retention.ms"));
    char name[16] = "segment.bytes", value[16] = "1048576";
    const char *names[] = {"retention.ms", name, "cleanup.policy"}, *values[] = {"1000", value, "compact"};
    assert_int_equal(gr_image_set_topic_configs(img, t, names, values, 3), 0);
    name[0] = value[0] = 'X'; /* copied */
    assert_int_equal(t->config_count, 3);
    assert_string_equal(t->configs[0].name, "cleanup.policy");
    assert_string_equal(t->configs[2].name, "segment.bytes");
    assert_string_equal(gr_image_topic_config(t, "segment.bytes"), "1048576");
    assert_string_equal(gr_image_topic_config(t, "retention.ms"), "1000");
    assert_null(gr_image_topic_config(t, "retention.bytes"));
    /* refusals leave the set as it was */
    const char *dup[] = {"retention.ms", "retention.ms"}, *dv[] = {"1", "2"};
    assert_int_equal(gr_image_set_topic_configs(img, t, dup, dv, 2), -EINVAL);
    const char *empty[] = {""};
    assert_int_equal(gr_image_set_topic_configs(img, t, empty, dv, 1), -EINVAL);
    assert_int_equal(gr_image_set_topic_configs(img, t, names, values, GR_CLUSTER_TOPIC_CONFIGS_MAX + 1),
                     -EINVAL);
    assert_int_equal(gr_image_set_topic_configs(img, t, names, values, -1), -EINVAL);
    static char big[GR_CLUSTER_CONFIG_VALUE_BYTES_MAX + 2];
    memset(big, 'v', sizeof big - 1);
    const char *bigv[] = {big};
    assert_int_equal(gr_image_set_topic_configs(img, t, names, bigv, 1), -EINVAL);
    assert_int_equal(t->config_count, 3);
    assert_string_equal(gr_image_topic_config(t, "cleanup.policy"), "compact");
    /* an update of the topic keeps them; a new set replaces them; an empty set clears them */
    assert_int_equal(gr_image_put_topic(img, "cfg", 3, id, false, 4, NULL, &t), 0);
    assert_string_equal(gr_image_topic_config(t, "retention.ms"), "1000");
    assert_int_equal(gr_image_set_topic_configs(img, t, names, values, 1), 0);
    assert_int_equal(t->config_count, 1);
    assert_null(gr_image_topic_config(t, "cleanup.policy"));
    /* re-created under a new id: none */
    assert_int_equal(gr_image_put_topic(img, "cfg", 3, id2, false, 1, NULL, &t), 0);
    assert_int_equal(t->config_count, 0);
    assert_null(gr_image_topic_config(t, "retention.ms"));
    assert_int_equal(gr_image_set_topic_configs(img, t, names, values, 2), 0);
    assert_int_equal(gr_image_set_topic_configs(img, t, NULL, NULL, 0), 0);
    assert_int_equal(t->config_count, 0);
    assert_int_equal(gr_image_set_topic_configs(img, t, names, values, 2), 0);
    gr_image_free(img); /* frees them (ASan) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brokers),       cmocka_unit_test(test_broker_bounds),
        cmocka_unit_test(test_topics),        cmocka_unit_test(test_recreate_same_name),
        cmocka_unit_test(test_topic_bounds),  cmocka_unit_test(test_many_topics),
        cmocka_unit_test(test_observers),     cmocka_unit_test(test_partition_epoch),
        cmocka_unit_test(test_topic_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
