/*
 * test_store.c: topics (create, validation, order, ids, configs, growth, persistence), delete and
 * immediate re-create with a slice held across the deletion, retention by time and by size, DeleteRecords,
 * and per-partition producer state (updates, snapshots, pruning, the snapshot codec).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "storage/internal.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->store) gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static void reopen(struct fx *f)
{
    gr_store_close(f->store);
    f->store = NULL;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
}

static struct gr_topic *find(struct fx *f, const char *name)
{
    return gr_store_topic_find(f->store, name, strlen(name));
}

static int64_t append_spec(struct gr_log *log, const struct th_batch_spec *spec)
{
    size_t len;
    uint8_t *b = th_batch(spec, &len);
    struct gr_append_result res;
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    assert_int_equal(err, 0);
    /* Lets a spare segment file asked for at half a roll limit be made before the next append, so that
       rolls happen where Kafka's do (a roll without a spare waits for one: storage/roll.c). */
    gr_store_quiesce(log->store);
    return res.base_offset;
}

static int64_t append(struct gr_log *log, int32_t count, int64_t ts, uint32_t tag)
{
    struct th_batch_spec s = {.count = count, .ts0 = ts, .ts_step = 0, .tag = tag, .producer_id = -1};
    return append_spec(log, &s);
}

static void read_text(const char *path, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

static int count_entries(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name), s = strlen(suffix);
        if (l >= s && strcmp(de->d_name + l - s, suffix) == 0) n++;
    }
    closedir(d);
    return n;
}

static void test_topic_create_and_validate(void **state)
{
    struct fx *f = *state;
    struct gr_topic *a, *b, *c, *x;
    const char *k[] = {"retention.ms", "cleanup.policy"}, *v[] = {"1000", "delete"};
    assert_int_equal(gr_store_topic_create(f->store, "b", 1, NULL, NULL, 0, &b), 0);
    assert_int_equal(gr_store_topic_create(f->store, "a", 3, k, v, 2, &a), 0);
    assert_int_equal(gr_store_topic_create(f->store, "c.d_e-f", 2, NULL, NULL, 0, &c), 0);
    assert_int_equal(gr_store_topic_create(f->store, "a", 1, NULL, NULL, 0, &x), -EEXIST);
    char longname[260];
    memset(longname, 'n', 250);
    longname[250] = '\0';
    const char *bad_names[] = {"", ".", "..", "a/b", "sp ace", longname};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
        assert_int_equal(gr_store_topic_create(f->store, bad_names[i], 1, NULL, NULL, 0, &x), -EINVAL);
    longname[249] = '\0';
    assert_int_equal(gr_store_topic_create(f->store, longname, 1, NULL, NULL, 0, &x), 0); /* 249 is the max */
    assert_int_equal(gr_store_topic_create(f->store, "z", 0, NULL, NULL, 0, &x), -EINVAL);
    const char *bk[] = {"no.such.config"}, *bv[] = {"1"};
    assert_int_equal(gr_store_topic_create(f->store, "z", 1, bk, bv, 1, &x), -EINVAL);
    const char *bk2[] = {"segment.bytes"}, *bv2[] = {"12abc"};
    assert_int_equal(gr_store_topic_create(f->store, "z", 1, bk2, bv2, 1, &x), -EINVAL);
    const char *bk3[] = {"compression.type"}, *bv3[] = {"zstd\nname=evil"};
    assert_int_equal(gr_store_topic_create(f->store, "z", 1, bk3, bv3, 1, &x), -EINVAL);
    const char *bk4[] = {"cleanup.policy"}, *bv4[] = {"delete,shred"};
    assert_int_equal(gr_store_topic_create(f->store, "z", 1, bk4, bv4, 1, &x), -EINVAL);
    assert_null(find(f, "z"));

    assert_int_equal(gr_store_topic_count(f->store), 4);
    assert_string_equal(gr_topic_name(gr_store_topic_at(f->store, 0)), "a");
    assert_string_equal(gr_topic_name(gr_store_topic_at(f->store, 1)), "b");
    assert_string_equal(gr_topic_name(gr_store_topic_at(f->store, 2)), "c.d_e-f");
    assert_string_equal(gr_topic_name(gr_store_topic_at(f->store, 3)), longname);
    assert_ptr_equal(gr_store_topic_find_id(f->store, gr_topic_id(c)), c);
    assert_memory_not_equal(gr_topic_id(a), gr_topic_id(b), 16);
    assert_int_equal(gr_topic_partition_count(a), 3);
    assert_null(gr_topic_log(a, 3));
    assert_null(gr_topic_log(a, -1));
    assert_string_equal(gr_topic_config_get(a, "retention.ms"), "1000");
    assert_null(gr_topic_config_get(a, "segment.ms"));
    assert_int_equal(a->cfg.retention_ms, 1000);
    assert_int_equal(b->cfg.retention_ms, f->cfg.retention_ms);

    /* partition.metadata in Kafka's format. */
    char id[23], want[64], got[128], path[512];
    gr_uuid_to_base64url(gr_topic_id(a), id);
    snprintf(want, sizeof(want), "version: 0\ntopic_id: %s\n", id);
    snprintf(path, sizeof(path), "%s/a-2/partition.metadata", f->dir);
    read_text(path, got, sizeof(got));
    assert_string_equal(got, want);

    /* Everything survives a reopen; the cluster id too. */
    uint8_t aid[16];
    memcpy(aid, gr_topic_id(a), 16);
    char cluster[23];
    strcpy(cluster, gr_store_cluster_id(f->store));
    assert_int_equal(strlen(cluster), 22);
    reopen(f);
    assert_string_equal(gr_store_cluster_id(f->store), cluster);
    snprintf(path, sizeof(path), "%s/meta.properties", f->dir);
    read_text(path, got, sizeof(got));
    assert_non_null(strstr(got, "cluster.id="));
    assert_non_null(strstr(got, cluster));
    assert_non_null(strstr(got, "node.id=1\n"));
    assert_int_equal(gr_store_topic_count(f->store), 4);
    a = find(f, "a");
    assert_non_null(a);
    assert_memory_equal(gr_topic_id(a), aid, 16);
    assert_int_equal(gr_topic_partition_count(a), 3);
    assert_string_equal(gr_topic_config_get(a, "cleanup.policy"), "delete");
    assert_int_equal(a->cfg.retention_ms, 1000);

    /* Configs are replaced as a whole, durably. */
    const char *nk[] = {"segment.bytes", "message.timestamp.type"}, *nv[] = {"5000", "LogAppendTime"};
    assert_int_equal(gr_topic_config_set_all(f->store, a, nk, nv, 2), 0);
    assert_null(gr_topic_config_get(a, "retention.ms"));
    assert_int_equal(a->cfg.segment_bytes, 5000);
    assert_int_equal(gr_topic_config_set_all(f->store, a, bk, bv, 1), -EINVAL);
    assert_int_equal(gr_topic_config_count(a), 2);
    /* Growing. */
    assert_int_equal(gr_store_topic_add_partitions(f->store, a, 3), -EINVAL);
    assert_int_equal(gr_store_topic_add_partitions(f->store, a, 5), 0);
    assert_int_equal(gr_topic_partition_count(a), 5);
    append(gr_topic_log(a, 4), 3, 0, 1);
    reopen(f);
    a = find(f, "a");
    assert_int_equal(gr_topic_partition_count(a), 5);
    assert_int_equal(gr_log_end_offset(gr_topic_log(a, 4)), 3);
    assert_string_equal(gr_topic_config_get(a, "message.timestamp.type"), "LogAppendTime");
    assert_int_equal(a->cfg.segment_bytes, 5000);
    assert_int_equal(a->cfg.retention_ms, f->cfg.retention_ms);
}

/* The typed topic policy: topic-level values parsed once, the rest resolved against the broker defaults,
 * and re-resolved when the topic's configs or the broker defaults change (gr_store_set_defaults). */
static void test_topic_policy(void **state)
{
    struct fx *f = *state;
    struct gr_topic *a, *b;
    const char *k[] = {"max.message.bytes",
                       "message.timestamp.type",
                       "compression.type",
                       "message.timestamp.after.max.ms",
                       "max.decompressed.message.bytes",
                       "cleanup.policy"};
    const char *v[] = {"5000", "LogAppendTime", "zstd", "7200000", "4096", "compact"};
    assert_int_equal(gr_store_topic_create(f->store, "pa", 1, k, v, 6, &a), 0);
    assert_int_equal(gr_store_topic_create(f->store, "pb", 1, NULL, NULL, 0, &b), 0);
    const struct gr_log_config *pa = gr_topic_policy(a), *pb = gr_topic_policy(b);
    assert_int_equal(pa->max_message_bytes, 5000);
    assert_true(pa->log_append_time);
    assert_int_equal(pa->compression_type, GR_COMPRESSION_ZSTD);
    assert_int_equal(pa->message_timestamp_after_max_ms, 7200000);
    assert_int_equal(pa->max_decompressed_message_bytes, 4096);
    assert_true(pa->compact_policy);
    assert_false(pa->delete_policy);
    /* unset: the broker defaults (storage's defaults here) */
    assert_int_equal(pb->max_message_bytes, GR_MESSAGE_BYTES_DEFAULT);
    assert_false(pb->log_append_time);
    assert_int_equal(pb->compression_type, GR_COMPRESSION_PRODUCER);
    assert_int_equal(pb->message_timestamp_after_max_ms, 3600000);
    assert_int_equal(pb->message_timestamp_before_max_ms, INT64_MAX);
    assert_int_equal(pb->max_decompressed_message_bytes, GR_MAX_DECOMPRESSED_MESSAGE_BYTES_DEFAULT);
    assert_true(pb->delete_policy);
    /* a broker default change reaches the topics without their own value, not the others */
    struct gr_store_config sc;
    gr_store_config_defaults(&sc);
    sc.max_message_bytes = 777;
    sc.log_append_time = true;
    sc.compression_type = GR_COMPRESSION_LZ4;
    sc.timestamp_after_max_ms = 1000;
    sc.cleanup_compact = true;
    gr_store_set_defaults(f->store, &sc);
    assert_int_equal(pb->max_message_bytes, 777);
    assert_true(pb->log_append_time);
    assert_int_equal(pb->compression_type, GR_COMPRESSION_LZ4);
    assert_int_equal(pb->message_timestamp_after_max_ms, 1000);
    assert_true(pb->compact_policy && pb->delete_policy);
    assert_int_equal(pa->max_message_bytes, 5000);
    assert_int_equal(pa->compression_type, GR_COMPRESSION_ZSTD);
    assert_int_equal(pa->message_timestamp_after_max_ms, 7200000);
    /* a topic config change: the removed keys fall back to the (new) broker defaults */
    const char *nk[] = {"compression.type"}, *nv[] = {"producer"};
    assert_int_equal(gr_topic_config_set_all(f->store, a, nk, nv, 1), 0);
    pa = gr_topic_policy(a);
    assert_int_equal(pa->compression_type, GR_COMPRESSION_PRODUCER);
    assert_int_equal(pa->max_message_bytes, 777);
    assert_true(pa->log_append_time);
    assert_int_equal(pa->max_decompressed_message_bytes, GR_MAX_DECOMPRESSED_MESSAGE_BYTES_DEFAULT);
    assert_int_equal(gr_compression_type_parse("gzip"), GR_COMPRESSION_GZIP);
    assert_int_equal(gr_compression_type_parse("uncompressed"), GR_COMPRESSION_UNCOMPRESSED);
    assert_int_equal(gr_compression_type_parse("ZSTD"), GR_COMPRESSION_PRODUCER); /* as strcmp did */
}

static void test_node_id_mismatch(void **state)
{
    struct fx *f = *state;
    gr_store_close(f->store);
    f->store = NULL;
    f->cfg.node_id = 7;
    struct gr_store *s;
    assert_int_equal(gr_store_open(&f->cfg, &s), -EINVAL);
    f->cfg.node_id = 1;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
}

static void test_delete_and_recreate(void **state)
{
    struct fx *f = *state;
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"600"};
    assert_int_equal(gr_store_topic_create(f->store, "t", 2, k, v, 1, &t), 0);
    struct gr_log *old_log = gr_topic_log(t, 0);
    for (uint32_t i = 0; i < 20; i++)
        append(old_log, 4, 1000, i);
    assert_true(gr_log_segment_count(old_log) > 2);
    uint8_t old_id[16];
    memcpy(old_id, gr_topic_id(t), 16);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(old_log, 0, 1 << 20, INT64_MAX, true, &s), 0);
    assert_true(s.bytes > 0);

    assert_int_equal(gr_store_topic_delete(f->store, t), 0);
    assert_null(find(f, "t"));
    assert_int_equal(gr_store_topic_count(f->store), 0);
    assert_null(gr_topic_log(t, 0)); /* the old struct stays valid, but has no logs */
    assert_true(gr_log_offline(old_log));
    size_t len;
    uint8_t *b = th_simple(1, 0, 0, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(old_log, b, len, -1, &res), -EROFS);
    free(b);
    char path[512];
    snprintf(path, sizeof(path), "%s/t-0", f->dir);
    assert_int_equal(access(path, F_OK), -1); /* renamed away at once */

    /* Re-create at once: new id, empty log, the name's directory is fresh. */
    struct gr_topic *t2;
    assert_int_equal(gr_store_topic_create(f->store, "t", 1, NULL, NULL, 0, &t2), 0);
    assert_memory_not_equal(gr_topic_id(t2), old_id, 16);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t2, 0)), 0);
    append(gr_topic_log(t2, 0), 2, 0, 99);

    /* The slice taken before the deletion still reads the old bytes. */
    gr_store_quiesce(f->store);
    uint8_t *bytes = th_slice_bytes(&s);
    assert_non_null(bytes);
    assert_int_equal(gr_batch_base_offset(bytes), 0);
    assert_int_equal(gr_batch_crc(bytes), gr_batch_crc_compute(bytes, (size_t)gr_batch_total_bytes(bytes)));
    free(bytes);
    gr_log_slice_release(&s);
    /* The deleted directories are gone; only the new t-0 remains. */
    assert_int_equal(count_entries(f->dir, "-delete"), 0);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof(path), "%s/t-1", f->dir);
    assert_int_equal(access(path, F_OK), -1);

    reopen(f);
    t2 = find(f, "t");
    assert_non_null(t2);
    assert_int_equal(gr_topic_partition_count(t2), 1);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t2, 0)), 2);
    struct th_seen *seen;
    assert_int_equal(th_read_all(gr_topic_log(t2, 0), 0, INT64_MAX, &seen), 1);
    assert_int_equal(seen[0].tag, 99);
    free(seen);
}

static void test_stray_and_pending_delete_dirs(void **state)
{
    struct fx *f = *state;
    gr_store_close(f->store);
    f->store = NULL;
    char path[512];
    snprintf(path, sizeof(path), "%s/ghost-0", f->dir); /* no topic file: a stray */
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/ghost-0/00000000000000000000.log", f->dir);
    fclose(fopen(path, "w"));
    snprintf(path, sizeof(path), "%s/old-3.0123456789abcdef0123456789abcdef-delete", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    gr_store_quiesce(f->store);
    assert_int_equal(count_entries(f->dir, "-delete"), 0);
    snprintf(path, sizeof(path), "%s/ghost-0", f->dir);
    assert_int_equal(access(path, F_OK), -1);
}

static struct gr_log *make_log(struct fx *f, const char *name, const char *const *k, const char *const *v,
                               int n)
{
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, name, 1, k, v, n, &t), 0);
    return gr_topic_log(t, 0);
}

/* What the store's start hook (gr_store_set_start_hook) was told: its calls and the last (old, new). */
struct start_seen {
    int calls;
    struct gr_log *log;
    int64_t old_start, new_start;
};

static void on_start(void *ctx, struct gr_log *log, int64_t old_start, int64_t new_start)
{
    struct start_seen *x = ctx;
    x->calls++;
    x->log = log;
    x->old_start = old_start;
    x->new_start = new_start;
}

static void test_retention_by_time(void **state)
{
    struct fx *f = *state;
    struct start_seen hook = {0};
    gr_store_set_start_hook(f->store, on_start, &hook);
    const char *k[] = {"segment.bytes", "retention.ms"}, *v[] = {"700", "50000"};
    struct gr_log *log = make_log(f, "rt", k, v, 2);
    for (uint32_t i = 0; i < 20; i++)
        append(log, 4, 1000 + i, i); /* old data */
    for (uint32_t i = 20; i < 40; i++)
        append(log, 4, 100000 + i, i); /* recent data */
    int segs = gr_log_segment_count(log);
    assert_true(segs > 6);
    /* The server's high watermark is 0: nothing may go, however old. */
    gr_log_set_high_watermark(log, 0);
    gr_store_retention_run(f->store, 120000);
    assert_int_equal(gr_log_segment_count(log), segs);
    assert_int_equal(gr_log_start_offset(log), 0);
    assert_int_equal(hook.calls, 0);
    gr_log_set_high_watermark(log, 160);
    gr_store_retention_run(f->store, 120000);
    /* Every segment whose largest timestamp is < 70000 went; the first kept holds batch 20's data. */
    int64_t ls = gr_log_start_offset(log);
    /* the start hook heard of the move once: 0 -> ls */
    assert_int_equal(hook.calls, 1);
    assert_ptr_equal(hook.log, log);
    assert_int_equal(hook.old_start, 0);
    assert_int_equal(hook.new_start, ls);
    assert_true(ls > 0 && ls <= 80);
    assert_int_equal(ls, log->segs[0]->base_offset);
    assert_true(log->segs[0]->max_timestamp_ms >= 70000);
    assert_true(gr_log_segment_count(log) < segs);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(log, ls - 1, 100, INT64_MAX, true, &s), -ERANGE);
    struct th_seen *seen;
    int n = th_read_all(log, ls, INT64_MAX, &seen);
    assert_int_equal(seen[n - 1].tag, 39);
    assert_int_equal(seen[0].base_offset, ls);
    free(seen);
    gr_store_quiesce(f->store); /* the retention run queued its checkpoint write */
    char path[512];
    snprintf(path, sizeof(path), "%s/log-start-offset-checkpoint", f->dir);
    char buf[256], want[64];
    read_text(path, buf, sizeof(buf));
    snprintf(want, sizeof(want), "rt 0 %lld\n", (long long)ls);
    assert_non_null(strstr(buf, want));
    snprintf(path, sizeof(path), "%s/rt-0", f->dir);
    assert_int_equal(count_entries(path, ".log"), gr_log_segment_count(log));

    /* Everything expired: the active segment is rolled and deleted too; offsets go on. */
    gr_store_retention_run(f->store, 1000000000);
    assert_int_equal(gr_log_segment_count(log), 1);
    assert_int_equal(gr_log_start_offset(log), 160);
    assert_int_equal(gr_log_end_offset(log), 160);
    assert_int_equal(gr_log_size_bytes(log), 0);
    assert_int_equal(hook.calls, 2);
    assert_int_equal(hook.old_start, ls);
    assert_int_equal(hook.new_start, 160);
    assert_int_equal(append(log, 1, 2000000000, 40), 160);
    reopen(f);
    log = gr_topic_log(find(f, "rt"), 0);
    assert_int_equal(gr_log_start_offset(log), 160);
    assert_int_equal(gr_log_end_offset(log), 161);
}

static void test_retention_bound_is_durable_offset(void **state)
{
    struct fx *f = *state;
    const char *k[] = {"segment.bytes", "retention.ms"}, *v[] = {"700", "50000"};
    struct gr_log *log = make_log(f, "rd", k, v, 2);
    /* Without a high watermark from the server, only durable data may expire. Rolls schedule flushes, so
       wait for them, then append more old data that nobody flushes. */
    for (uint32_t i = 0; i < 12; i++)
        append(log, 4, 1000 + i, i);
    gr_log_flush_async(log);
    assert_int_equal(th_wait_durable(log, 48), 0);
    gr_store_quiesce(f->store);
    const char *k2[] = {"segment.bytes", "retention.ms", "flush.messages"},
               *v2[] = {"100000", "50000", "1000000"};
    assert_int_equal(gr_topic_config_set_all(f->store, gr_log_topic(log), k2, v2, 3), 0);
    for (uint32_t i = 12; i < 20; i++)
        append(log, 4, 1000 + i, i); /* stays in the active segment, not durable */
    int64_t durable = gr_log_durable_offset(log);
    assert_int_equal(durable, 48);
    gr_store_retention_run(f->store, 1000000);
    /* Every sealed segment (all below 48) went; the active one holds offsets >= 48 and stays. */
    assert_int_equal(gr_log_segment_count(log), 1);
    assert_true(gr_log_start_offset(log) <= 48);
    assert_int_equal(gr_log_end_offset(log), 80);
}

static void test_retention_by_size(void **state)
{
    struct fx *f = *state;
    const char *k[] = {"segment.bytes", "retention.bytes"}, *v[] = {"1000", "2500"};
    struct gr_log *log = make_log(f, "rs", k, v, 2);
    for (uint32_t i = 0; i < 100; i++)
        append(log, 3, 1000, i);
    gr_log_set_high_watermark(log, gr_log_end_offset(log)); /* the server's bound (acks=1 style) */
    int64_t before = gr_log_size_bytes(log);
    assert_true(before > 5000);
    gr_store_retention_run(f->store, 2000);
    int64_t after = gr_log_size_bytes(log);
    /* Kafka's rule: delete the oldest while the log stays >= retention.bytes without it. */
    assert_true(after >= 2500);
    assert_true(after - log->segs[0]->size_bytes < 2500);
    int64_t sum = 0;
    for (int i = 0; i < log->seg_count; i++)
        sum += log->segs[i]->size_bytes;
    assert_int_equal(sum, after);
    assert_int_equal(gr_log_start_offset(log), log->segs[0]->base_offset);
    assert_int_equal(gr_log_end_offset(log), 300);
    /* The high watermark comes back from replication-offset-checkpoint, but until the server sets it
       again the retention bound is the durable offset (a stale restored value must not freeze it). */
    gr_log_set_high_watermark(log, 290);
    reopen(f);
    log = gr_topic_log(find(f, "rs"), 0);
    assert_int_equal(gr_log_high_watermark(log), 290);
    assert_false(log->hwm_from_server);
    assert_int_equal(gr_log_durable_offset(log), 300);
}

static void test_delete_records(void **state)
{
    struct fx *f = *state;
    const char *k[] = {"segment.bytes"}, *v[] = {"500"};
    struct gr_log *log = make_log(f, "dr", k, v, 1);
    struct start_seen hook = {0};
    gr_store_set_start_hook(f->store, on_start, &hook);
    for (uint32_t i = 0; i < 20; i++)
        append(log, 5, 1000, i); /* offsets 0..99 */
    int segs = gr_log_segment_count(log);
    assert_int_equal(gr_log_delete_records(log, 101), -ERANGE);
    assert_int_equal(gr_log_delete_records(log, 57), 0);
    assert_int_equal(gr_log_start_offset(log), 57);
    assert_int_equal(hook.calls, 1); /* the start hook: 0 -> 57 */
    assert_int_equal(hook.old_start, 0);
    assert_int_equal(hook.new_start, 57);
    assert_true(gr_log_segment_count(log) < segs);
    assert_true(log->segs[0]->base_offset <= 57);
    assert_true(log->seg_count == 1 || log->segs[1]->base_offset > 57);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(log, 56, 100, INT64_MAX, true, &s), -ERANGE);
    assert_int_equal(gr_log_read(log, 57, 100, INT64_MAX, true, &s), 0);
    assert_int_equal(s.first_batch_offset, 55); /* the batch holding 57 is served whole */
    gr_log_slice_release(&s);
    assert_int_equal(gr_log_delete_records(log, 10), 0); /* below: nothing to do */
    assert_int_equal(gr_log_start_offset(log), 57);
    assert_int_equal(hook.calls, 1); /* and nothing told */
    int64_t off, ts;
    int32_t ep;
    assert_int_equal(gr_log_offset_for_time(log, 0, INT64_MAX, &off, &ts, &ep), 0);
    assert_int_equal(off, 57); /* records below the log start are not answers */
    /* Durable before returning: the checkpoint already says 57. */
    char path[512], buf[256];
    snprintf(path, sizeof(path), "%s/log-start-offset-checkpoint", f->dir);
    read_text(path, buf, sizeof(buf));
    assert_non_null(strstr(buf, "dr 0 57\n"));
    reopen(f);
    log = gr_topic_log(find(f, "dr"), 0);
    assert_int_equal(gr_log_start_offset(log), 57);
    assert_int_equal(gr_log_end_offset(log), 100);
    assert_int_equal(gr_log_epoch_for_offset(log, 57), 0);
    assert_int_equal(gr_log_epoch_for_offset(log, 56), -1);
    /* Up to the log end: the log is empty but keeps its offsets. */
    assert_int_equal(gr_log_delete_records(log, 100), 0);
    assert_int_equal(gr_log_read(log, 100, 100, INT64_MAX, true, &s), 0);
    assert_int_equal(s.bytes, 0);
}

static struct th_batch_spec pspec(int64_t pid, int16_t epoch, int32_t seq, int32_t count, uint32_t tag)
{
    struct th_batch_spec s = {.count = count,
                              .ts0 = 5000 + tag,
                              .ts_step = 1,
                              .tag = tag,
                              .producer_id = pid,
                              .producer_epoch = epoch,
                              .base_sequence = seq};
    return s;
}

static void test_producer_state(void **state)
{
    struct fx *f = *state;
    const char *k[] = {"segment.bytes"}, *v[] = {"800"};
    struct gr_log *log = make_log(f, "ps", k, v, 1);
    struct th_batch_spec s;
    int64_t last7 = -1;
    for (int i = 0; i < 8; i++) { /* producer 7: 8 batches of 3, sequences 0, 3, 6, ... */
        s = pspec(7, 0, 3 * i, 3, (uint32_t)i);
        last7 = append_spec(log, &s) + 2;
    }
    s = pspec(9, 4, 100, 2, 100);
    append_spec(log, &s);
    append(log, 2, 0, 200); /* no producer */
    const struct gr_producer_state *ps = gr_log_producer_state(log);
    assert_int_equal(gr_producer_state_count(ps), 2);
    const struct gr_producer_entry *e = gr_producer_state_find(ps, 7);
    assert_non_null(e);
    assert_int_equal(e->producer_epoch, 0);
    assert_int_equal(e->batch_count, 5); /* the last five */
    assert_int_equal(e->batches[0].first_seq, 9);
    assert_int_equal(e->batches[4].first_seq, 21);
    assert_int_equal(e->batches[4].last_seq, 23);
    assert_int_equal(gr_producer_entry_last_seq(e), 23);
    assert_int_equal(e->batches[4].last_offset, last7);
    assert_int_equal(e->batches[4].offset_delta, 2);
    assert_non_null(gr_producer_entry_find_batch(e, 15, 17));
    assert_null(gr_producer_entry_find_batch(e, 3, 5)); /* fell out of the window */
    e = gr_producer_state_find(ps, 9);
    assert_int_equal(e->producer_epoch, 4);
    assert_int_equal(gr_producer_entry_last_seq(e), 101);
    assert_null(gr_producer_state_find(ps, 8));
    /* A new epoch clears the history. */
    s = pspec(9, 5, 0, 1, 101);
    append_spec(log, &s);
    e = gr_producer_state_find(ps, 9);
    assert_int_equal(e->producer_epoch, 5);
    assert_int_equal(e->batch_count, 1);
    assert_int_equal(gr_producer_entry_last_seq(e), 0);

    /* Snapshots were written at rolls (and at close); a clean reopen gives the same state. */
    gr_store_quiesce(f->store);
    char path[512];
    snprintf(path, sizeof(path), "%s/ps-0", f->dir);
    int snaps = count_entries(path, ".snapshot");
    assert_true(snaps >= 1 && snaps <= GR_SNAPSHOTS_KEPT);
    struct gr_producer_state copy;
    gr_producer_state_init(&copy);
    size_t n = gr_producer_state_encoded_bytes(ps);
    uint8_t *buf = malloc(n);
    gr_producer_state_encode(ps, buf);
    assert_int_equal(gr_producer_state_decode(&copy, buf, n), 0);
    free(buf);
    reopen(f);
    log = gr_topic_log(find(f, "ps"), 0);
    assert_true(gr_producer_state_equal(gr_log_producer_state(log), &copy));
    /* The state a reader rebuilds from the log equals the log's own. */
    struct gr_producer_state rebuilt;
    gr_producer_state_init(&rebuilt);
    struct th_seen *seen;
    assert_true(th_read_all_ps(log, 0, INT64_MAX, &seen, &rebuilt) > 0);
    free(seen);
    assert_true(gr_producer_state_equal(&rebuilt, gr_log_producer_state(log)));

    /* DeleteRecords past producer 7's last batch forgets it; producer 9 stays. */
    assert_int_equal(gr_log_delete_records(log, last7 + 1), 0);
    assert_null(gr_producer_state_find(gr_log_producer_state(log), 7));
    assert_non_null(gr_producer_state_find(gr_log_producer_state(log), 9));
    reopen(f);
    log = gr_topic_log(find(f, "ps"), 0);
    assert_null(gr_producer_state_find(gr_log_producer_state(log), 7));
    assert_non_null(gr_producer_state_find(gr_log_producer_state(log), 9));
    gr_producer_state_free(&copy);
    gr_producer_state_free(&rebuilt);
}

static void test_producer_state_codec(void **state)
{
    (void)state;
    struct gr_producer_state ps, back;
    gr_producer_state_init(&ps);
    gr_producer_state_init(&back);
    uint8_t hdr[GR_BATCH_HEADER_BYTES];
    for (int64_t pid = 0; pid < 300; pid++) { /* enough to grow and rehash */
        for (int b = 0; b < (int)(pid % 7); b++) {
            memset(hdr, 0, sizeof(hdr));
            gr_put_be64(hdr + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)(pid * 100 + b * 10));
            gr_put_be32(hdr + GR_BATCH_OFF_LAST_OFFSET_DELTA, 4);
            gr_put_be64(hdr + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)(1000 + b));
            gr_put_be64(hdr + GR_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
            gr_put_be16(hdr + GR_BATCH_OFF_PRODUCER_EPOCH, 2);
            int64_t seq = (int64_t)INT32_MAX - 6 + 5 * b; /* wraps past INT32_MAX to 0 as Kafka's do */
            if (seq > INT32_MAX) seq -= (int64_t)INT32_MAX + 1;
            gr_put_be32(hdr + GR_BATCH_OFF_BASE_SEQUENCE, (uint32_t)seq);
            assert_int_equal(gr_producer_state_update(&ps, hdr, sizeof(hdr), NULL), 0);
        }
    }
    const struct gr_producer_entry *e = gr_producer_state_find(&ps, 6);
    assert_non_null(e);
    assert_int_equal(e->batch_count, 5);
    /* Sequence wrap: the batch starting at INT32_MAX - 6 + 5 = INT32_MAX - 1 ends at 2. */
    assert_int_equal(e->batches[0].first_seq, INT32_MAX - 1);
    assert_int_equal(e->batches[0].last_seq, 2);
    size_t n = gr_producer_state_encoded_bytes(&ps);
    uint8_t *buf = malloc(n);
    gr_producer_state_encode(&ps, buf);
    assert_int_equal(gr_producer_state_decode(&back, buf, n), 0);
    assert_true(gr_producer_state_equal(&ps, &back));
    assert_int_equal(back.end_offset, ps.end_offset);
    buf[n / 2] ^= 0x40;
    assert_int_equal(gr_producer_state_decode(&back, buf, n), -EINVAL);
    assert_int_equal(gr_producer_state_count(&back), 0);
    assert_int_equal(gr_producer_state_decode(&back, buf, 10), -EINVAL);
    free(buf);
    /* Removal keeps every other entry reachable (backward-shift deletion). */
    size_t before = gr_producer_state_count(&ps);
    gr_producer_state_truncate_head(&ps, 15000);
    size_t after = gr_producer_state_count(&ps);
    assert_true(after < before);
    for (int64_t pid = 0; pid < 300; pid++) {
        if (pid % 7 == 0) continue;
        int64_t last = pid * 100 + (pid % 7 - 1) * 10 + 4;
        if (last >= 15000)
            assert_non_null(gr_producer_state_find(&ps, pid));
        else
            assert_null(gr_producer_state_find(&ps, pid));
    }
    gr_producer_state_free(&ps);
    gr_producer_state_free(&back);
}

static void test_open_fd_limit(void **state)
{
    struct fx *f = *state;
    gr_store_close(f->store);
    f->cfg.open_segment_fds_max = 3;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    const char *k[] = {"segment.bytes"}, *v[] = {"300"};
    struct gr_log *log = make_log(f, "fds", k, v, 1);
    for (uint32_t i = 0; i < 60; i++)
        append(log, 2, 0, i);
    assert_true(gr_log_segment_count(log) > 10);
    gr_log_flush_async(log);
    assert_int_equal(th_wait_durable(log, 120), 0);
    gr_store_quiesce(f->store);
    struct th_seen *seen;
    assert_int_equal(th_read_all(log, 0, INT64_MAX, &seen), 60);
    free(seen);
    assert_true(f->store->lru_count <= 3);
    int open_sealed = 0;
    for (int i = 0; i + 1 < log->seg_count; i++)
        open_sealed += log->segs[i]->fd >= 0;
    assert_true(open_sealed <= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_topic_create_and_validate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_id_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_and_recreate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stray_and_pending_delete_dirs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_by_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_bound_is_durable_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_by_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_producer_state, setup, teardown),
        cmocka_unit_test(test_producer_state_codec),
        cmocka_unit_test_setup_teardown(test_open_fd_limit, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
