/*
 * store.c: the log directory: meta.properties, topic metadata, the offset checkpoints, opening and
 * recovering every partition at start, clean shutdown, topic create/delete/grow, per-topic configs and the
 * retention sweep. See store.h for the layout. Formats written here:
 *
 * meta.properties (Kafka's java.util.Properties text, KRaft form):
 *   LINE            MEANING
 *   #...            comments
 *   node.id=<n>     the node id (must match the configured one on later opens, as Kafka requires)
 *   directory.id=<22 base64url>  random id of this log directory (KIP-858)
 *   version=1       KRaft meta.properties version
 *   cluster.id=<22 base64url>    random 16 bytes, Kafka's Uuid text form
 *
 * __gregor_topics/<topic id, base64url>.topic (Gregor's text format, one "key=value" per line, atomically
 * replaced; named by id because a 249-byte topic name leaves no room for suffixes in a 255-byte file name):
 *   LINE                  MEANING
 *   version=0             format version
 *   name=<topic>          the topic name
 *   topic_id=<base64url>  16-byte topic id, Kafka's Uuid text form (also in each partition.metadata)
 *   partitions=<n>        partition count
 *   sparse=1              (cluster mode only) the topic holds only some partitions here: those whose
 *                         directory exists (with partition.metadata naming this topic id)
 *   config.<key>=<value>  one line per topic-level config (values never contain a newline)
 * The topic file is the commit point: a partition directory whose topic has no file is a stray and is
 * removed at open; a topic is deleted by removing its file first, then renaming its directories.
 * Read next: log.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/time.h"
#include "storage/cleaner.h"
#include "storage/internal.h"
#include "storage/iopool.h"
#include "storage/sys.h"
#include "storage/topic_config.h"

#define TOPICS_DIR "__gregor_topics"
#define CLEAN_MARKER ".kafka_cleanshutdown"
#define CKPT_RECOVERY "recovery-point-offset-checkpoint"
#define CKPT_LOG_START "log-start-offset-checkpoint"
#define CKPT_HWM "replication-offset-checkpoint"
#define TOPIC_FILE_BYTES_MAX (16 * 1024 * 1024)
#define DAY_MS (24LL * 60 * 60 * 1000)

void gr_store_set_iopool(struct gr_store *store, struct gr_iopool *pool)
{
    store->iopool = pool;
}

void gr_store_config_defaults(struct gr_store_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->segment_bytes = 1073741824;
    cfg->segment_ms = 7 * DAY_MS;
    cfg->retention_ms = 7 * DAY_MS;
    cfg->retention_bytes = -1;
    cfg->index_interval_bytes = 4096;
    cfg->segment_index_bytes = 10485760;
    cfg->flush_interval_messages = INT64_MAX;
    cfg->flush_interval_ms = INT64_MAX;
    cfg->max_message_bytes = GR_MESSAGE_BYTES_DEFAULT;
    cfg->flusher_threads = 2;
    cfg->node_id = 1;
    cfg->open_segment_fds_max = 1024;
    cfg->delete_retention_ms = DAY_MS;
    cfg->min_cleanable_ratio = 0.5;
    cfg->min_compaction_lag_ms = 0;
    cfg->max_compaction_lag_ms = INT64_MAX;
    cfg->cleaner_dedupe_buffer_bytes = 134217728;
    cfg->cleaner_io_bytes_per_second = 0;
    cfg->cleaner_enable = true;
    cfg->cleaner_backoff_ms = 15000;
    cfg->flush_syncfs_min_logs = 16;
    cfg->cleanup_delete = true;
    cfg->roll_wait_bytes_min = 64 << 20;
    cfg->timestamp_before_max_ms = INT64_MAX;
    cfg->timestamp_after_max_ms = 3600000;
    cfg->compression_type = GR_COMPRESSION_PRODUCER;
}

const struct gr_log_config *gr_topic_policy(const struct gr_topic *t)
{
    return &t->cfg;
}

const char *gr_store_cluster_id(const struct gr_store *store)
{
    return store->cluster_id;
}
const char *gr_topic_name(const struct gr_topic *t)
{
    return t->name;
}
const uint8_t *gr_topic_id(const struct gr_topic *t)
{
    return t->id;
}
int32_t gr_topic_partition_count(const struct gr_topic *t)
{
    return t->partition_count;
}
int gr_store_topic_count(const struct gr_store *store)
{
    return store->topic_count;
}
int gr_topic_config_count(const struct gr_topic *t)
{
    return t->config_count;
}

struct gr_log *gr_topic_log(struct gr_topic *t, int32_t partition)
{
    if (t->deleted || partition < 0 || partition >= t->partition_count) return NULL;
    return t->logs[partition];
}

void gr_topic_config_at(const struct gr_topic *t, int i, const char **key, const char **value)
{
    *key = t->config_keys[i];
    *value = t->config_values[i];
}

const char *gr_topic_config_get(const struct gr_topic *t, const char *key)
{
    for (int i = 0; i < t->config_count; i++)
        if (strcmp(t->config_keys[i], key) == 0) return t->config_values[i];
    return NULL;
}

struct gr_topic *gr_store_topic_at(struct gr_store *store, int i)
{
    return i >= 0 && i < store->topic_count ? store->topics[i] : NULL;
}

/* ---------------------------------------------------------------- configs */

bool gr_topic_config_key_known(const char *key)
{
    /* The table of topic keys (storage/topic_config.c), and message.downconversion.enable, removed in Kafka
       4.0, which CreateTopics and topic files written before still accept. */
    return gr_tcfg_find(key) != NULL || (key && strcmp(key, "message.downconversion.enable") == 0);
}

static int parse_long(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!*s) return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max) return -EINVAL;
    *out = v;
    return 0;
}

/* Checks one key/value; fills `cfg` when the key is one storage interprets. */
static int config_apply(struct gr_log_config *cfg, const char *key, const char *value)
{
    int64_t v;
    if (!gr_topic_config_key_known(key) || strchr(value, '\n') || strlen(value) > 4096) return -EINVAL;
    if (strcmp(key, "segment.bytes") == 0) {
        if (parse_long(value, 14, INT32_MAX, &v) < 0) return -EINVAL;
        cfg->segment_bytes = v;
    } else if (strcmp(key, "segment.ms") == 0) {
        if (parse_long(value, 1, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->segment_ms = v;
    } else if (strcmp(key, "retention.ms") == 0) {
        if (parse_long(value, -1, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->retention_ms = v;
    } else if (strcmp(key, "retention.bytes") == 0) {
        if (parse_long(value, INT64_MIN, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->retention_bytes = v < 0 ? -1 : v;
    } else if (strcmp(key, "max.message.bytes") == 0) {
        if (parse_long(value, 0, INT32_MAX, &v) < 0) return -EINVAL;
        cfg->max_message_bytes = (int32_t)v;
    } else if (strcmp(key, "index.interval.bytes") == 0) {
        if (parse_long(value, 0, INT32_MAX, &v) < 0) return -EINVAL;
        cfg->index_interval_bytes = (int32_t)v;
    } else if (strcmp(key, "segment.index.bytes") == 0) {
        if (parse_long(value, 4, INT32_MAX, &v) < 0) return -EINVAL;
        cfg->segment_index_bytes = (int32_t)v;
    } else if (strcmp(key, "flush.messages") == 0) {
        if (parse_long(value, 1, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->flush_messages = v;
    } else if (strcmp(key, "flush.ms") == 0) {
        if (parse_long(value, 0, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->flush_ms = v;
    } else if (strcmp(key, "cleanup.policy") == 0) {
        /* A comma-separated list of "delete" and "compact" (compaction: storage/cleaner.c). */
        bool del = false, compact = false;
        const char *p = value;
        while (*p) {
            while (*p == ' ')
                p++;
            size_t n = strcspn(p, ",");
            size_t m = n;
            while (m && p[m - 1] == ' ')
                m--;
            if (m == 6 && strncmp(p, "delete", 6) == 0)
                del = true;
            else if (m == 7 && strncmp(p, "compact", 7) == 0)
                compact = true;
            else
                return -EINVAL;
            p += n;
            if (*p == ',') p++;
        }
        cfg->delete_policy = del;
        cfg->compact_policy = compact;
    } else if (strcmp(key, "delete.retention.ms") == 0) {
        if (parse_long(value, 0, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->delete_retention_ms = v;
    } else if (strcmp(key, "min.compaction.lag.ms") == 0) {
        if (parse_long(value, 0, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->min_compaction_lag_ms = v;
    } else if (strcmp(key, "max.compaction.lag.ms") == 0) {
        if (parse_long(value, 1, INT64_MAX, &v) < 0) return -EINVAL;
        cfg->max_compaction_lag_ms = v;
    } else if (strcmp(key, "min.cleanable.dirty.ratio") == 0) {
        char *end;
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end || !(d >= 0.0 && d <= 1.0)) return -EINVAL;
        cfg->min_cleanable_ratio = d;
    } else if (strcmp(key, "message.timestamp.type") == 0) {
        if (strcmp(value, "CreateTime") != 0 && strcmp(value, "LogAppendTime") != 0) return -EINVAL;
        cfg->log_append_time = strcmp(value, "LogAppendTime") == 0;
    } else if (strcmp(key, "max.decompressed.message.bytes") == 0) {
        cfg->max_decompressed_message_bytes = atoi(value); /* validated by the config APIs */
    } else if (strcmp(key, "message.timestamp.before.max.ms") == 0) {
        cfg->message_timestamp_before_max_ms = strtoll(value, NULL, 10);
    } else if (strcmp(key, "message.timestamp.after.max.ms") == 0) {
        cfg->message_timestamp_after_max_ms = strtoll(value, NULL, 10);
    } else if (strcmp(key, "compression.type") == 0) {
        cfg->compression_type = gr_compression_type_parse(value);
    }
    return 0;
}

static void store_defaults_cfg(const struct gr_store_config *sc, struct gr_log_config *cfg)
{
    cfg->segment_bytes = sc->segment_bytes;
    cfg->segment_ms = sc->segment_ms;
    cfg->retention_ms = sc->retention_ms;
    cfg->retention_bytes = sc->retention_bytes;
    cfg->index_interval_bytes = sc->index_interval_bytes;
    cfg->segment_index_bytes = sc->segment_index_bytes;
    cfg->max_message_bytes = sc->max_message_bytes;
    cfg->flush_messages = sc->flush_interval_messages;
    cfg->flush_ms = sc->flush_interval_ms;
    cfg->delete_policy = sc->cleanup_delete;
    cfg->compact_policy = sc->cleanup_compact;
    cfg->delete_retention_ms = sc->delete_retention_ms;
    cfg->min_cleanable_ratio = sc->min_cleanable_ratio;
    cfg->min_compaction_lag_ms = sc->min_compaction_lag_ms;
    cfg->max_compaction_lag_ms = sc->max_compaction_lag_ms;
    cfg->max_decompressed_message_bytes = GR_MAX_DECOMPRESSED_MESSAGE_BYTES_DEFAULT;
    cfg->log_append_time = sc->log_append_time;
    cfg->message_timestamp_before_max_ms = sc->timestamp_before_max_ms;
    cfg->message_timestamp_after_max_ms = sc->timestamp_after_max_ms;
    cfg->compression_type = sc->compression_type;
}

/* Validates a config set and computes the effective config it gives. */
static int configs_check(struct gr_store *store, const char *const *keys, const char *const *values,
                         int count, struct gr_log_config *cfg)
{
    store_defaults_cfg(&store->cfg, cfg);
    if (count < 0 || (count > 0 && (!keys || !values))) return -EINVAL;
    for (int i = 0; i < count; i++) {
        if (!keys[i] || !values[i] || config_apply(cfg, keys[i], values[i]) < 0) return -EINVAL;
        for (int j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0) return -EINVAL;
    }
    return 0;
}

void gr_log_config_effective(struct gr_store *store, struct gr_topic *topic)
{
    int err = configs_check(store, (const char *const *)topic->config_keys,
                            (const char *const *)topic->config_values, topic->config_count, &topic->cfg);
    (void)err; /* configs were validated when set */
}

/* ---------------------------------------------------------------- topic structs and files */

static void free_strings(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static void topic_free(struct gr_topic *t)
{
    if (!t) return;
    for (int i = 0; t->logs && i < t->partition_count; i++)
        gr_log_free(t->logs[i]); /* NULL (a partition a sparse topic does not hold) is ignored */
    free(t->logs);
    free_strings(t->config_keys, t->config_count);
    free_strings(t->config_values, t->config_count);
    free(t->name);
    free(t);
}

static int copy_strings(const char *const *src, int n, char ***out)
{
    *out = NULL;
    if (n == 0) return 0;
    char **v = calloc((size_t)n, sizeof(char *));
    if (!v) return -ENOMEM;
    for (int i = 0; i < n; i++) {
        if (!(v[i] = strdup(src[i]))) {
            free_strings(v, n);
            return -ENOMEM;
        }
    }
    *out = v;
    return 0;
}

static bool topic_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > GR_TOPIC_NAME_BYTES_MAX || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Formats the topic file of `t` with `partitions` and the given configs: *out (new) and *len, and its file
   name "<id>.topic" into fname (32 bytes). Returns 0 or -ENOMEM. */
static int topic_file_format(const struct gr_topic *t, int32_t partitions, char **keys, char **values,
                             int count, char **out, size_t *len, char fname[32])
{
    size_t cap = 256 + strlen(t->name);
    for (int i = 0; i < count; i++)
        cap += strlen(keys[i]) + strlen(values[i]) + 16;
    char *buf = malloc(cap), id[23];
    if (!buf) return -ENOMEM;
    gr_uuid_to_base64url(t->id, id);
    size_t n = (size_t)snprintf(buf, cap, "version=0\nname=%s\ntopic_id=%s\npartitions=%d\n%s", t->name, id,
                                partitions, t->sparse ? "sparse=1\n" : "");
    for (int i = 0; i < count; i++)
        n += (size_t)snprintf(buf + n, cap - n, "config.%s=%s\n", keys[i], values[i]);
    snprintf(fname, 32, "%s.topic", id);
    *out = buf;
    *len = n;
    return 0;
}

static int push_str(char ***v, int *n, const char *s, size_t len)
{
    char **nv = realloc(*v, sizeof(char *) * (size_t)(*n + 1));
    if (!nv) return -ENOMEM;
    *v = nv;
    if (!(nv[*n] = strndup(s, len))) return -ENOMEM;
    (*n)++;
    return 0;
}

/* Parses a topic file into a new topic (no logs yet). */
static int topic_file_parse(struct gr_store *store, const char *buf, size_t len, struct gr_topic **out)
{
    struct gr_topic *t = calloc(1, sizeof(*t));
    if (!t) return -ENOMEM;
    t->store = store;
    int err = 0, nk = 0, nv = 0;
    bool have_version = false, have_id = false;
    const char *p = buf, *end = buf + len;
    while (p < end && err == 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        const char *eq = memchr(p, '=', (size_t)(nl - p));
        if (nl == p) {
            p = nl + 1;
            continue;
        }
        if (!eq) {
            err = -EINVAL;
            break;
        }
        size_t kl = (size_t)(eq - p), vl = (size_t)(nl - eq - 1);
        const char *v = eq + 1;
        if (kl == 7 && memcmp(p, "version", 7) == 0) {
            have_version = vl == 1 && v[0] == '0';
        } else if (kl == 4 && memcmp(p, "name", 4) == 0) {
            free(t->name);
            t->name = strndup(v, vl);
            if (!t->name) err = -ENOMEM;
        } else if (kl == 8 && memcmp(p, "topic_id", 8) == 0) {
            have_id = gr_uuid_from_base64url(v, vl, t->id) == 0;
        } else if (kl == 10 && memcmp(p, "partitions", 10) == 0) {
            char tmp[16];
            int64_t n;
            if (vl >= sizeof(tmp))
                err = -EINVAL;
            else {
                memcpy(tmp, v, vl);
                tmp[vl] = '\0';
                if (parse_long(tmp, 1, GR_PARTITIONS_PER_TOPIC_MAX, &n) < 0) err = -EINVAL;
                t->partition_count = (int32_t)n;
            }
        } else if (kl == 6 && memcmp(p, "sparse", 6) == 0) {
            if (vl != 1 || v[0] != '1') err = -EINVAL;
            t->sparse = true;
        } else if (kl > 7 && memcmp(p, "config.", 7) == 0) {
            err = push_str(&t->config_keys, &nk, p + 7, kl - 7);
            if (err == 0) err = push_str(&t->config_values, &nv, v, vl);
        }
        p = nl + 1;
    }
    t->config_count = nk < nv ? nk : nv;
    if (err == 0 &&
        (!have_version || !have_id || !t->name || !topic_name_valid(t->name) || t->partition_count < 1))
        err = -EINVAL;
    if (err == 0 && configs_check(store, (const char *const *)t->config_keys,
                                  (const char *const *)t->config_values, t->config_count, &t->cfg) < 0)
        err = -EINVAL;
    if (err < 0) {
        t->partition_count = 0;
        topic_free(t);
        return err;
    }
    *out = t;
    return 0;
}

/* ---------------------------------------------------------------- topic list */

static int topic_cmp(const char *a, size_t al, const char *b)
{
    size_t bl = strlen(b);
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

/* Index of the live topic with this name, or -(insertion point) - 1. */
static int topic_search(const struct gr_store *store, const char *name, size_t len)
{
    int lo = 0, hi = store->topic_count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = topic_cmp(name, len, store->topics[mid]->name);
        if (c == 0) return mid;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -lo - 1;
}

struct gr_topic *gr_store_topic_find(struct gr_store *store, const char *name, size_t name_len)
{
    int i = topic_search(store, name, name_len);
    return i >= 0 ? store->topics[i] : NULL;
}

struct gr_topic *gr_store_topic_find_id(struct gr_store *store, const uint8_t id[16])
{
    for (int i = 0; i < store->topic_count; i++)
        if (memcmp(store->topics[i]->id, id, 16) == 0) return store->topics[i];
    return NULL;
}

static int topic_insert(struct gr_store *store, struct gr_topic *t)
{
    int i = topic_search(store, t->name, strlen(t->name));
    if (i >= 0) return -EEXIST;
    i = -i - 1;
    if (store->topic_count == store->topic_cap) {
        int ncap = store->topic_cap ? store->topic_cap * 2 : 16;
        struct gr_topic **n = realloc(store->topics, sizeof(*n) * (size_t)ncap);
        if (!n) return -ENOMEM;
        store->topics = n;
        store->topic_cap = ncap;
    }
    memmove(store->topics + i + 1, store->topics + i,
            sizeof(*store->topics) * (size_t)(store->topic_count - i));
    store->topics[i] = t;
    store->topic_count++;
    return 0;
}

/* ---------------------------------------------------------------- checkpoints */

typedef int64_t (*ckpt_value_fn)(struct gr_log *log);

static int64_t value_recovery(struct gr_log *log)
{
    return gr_log_recovery_point(log);
}
static int64_t value_log_start(struct gr_log *log)
{
    return gr_log_start_offset_for_checkpoint(log);
}
static int64_t value_hwm(struct gr_log *log)
{
    return gr_log_hw_bound(log);
}

/* Kafka's offset checkpoint text for every live log; returns new (free) with *len, or NULL (ENOMEM). */
static char *ckpt_format(struct gr_store *store, ckpt_value_fn fn, size_t *len)
{
    size_t cap = 64, count = 0;
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        for (int32_t p = 0; p < t->partition_count; p++)
            count += t->logs[p] != NULL; /* a sparse topic's partitions not held here are not listed */
        cap += (size_t)t->partition_count * (strlen(t->name) + 40);
    }
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t n = (size_t)snprintf(buf, cap, "0\n%zu\n", count);
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        for (int32_t p = 0; p < t->partition_count; p++)
            if (t->logs[p])
                n += (size_t)snprintf(buf + n, cap - n, "%s %d %" PRId64 "\n", t->name, p, fn(t->logs[p]));
    }
    *len = n;
    return buf;
}

static int ckpt_write(struct gr_store *store, const char *name, ckpt_value_fn fn, bool sync)
{
    size_t n;
    char *buf = ckpt_format(store, fn, &n);
    if (!buf) return -ENOMEM;
    return gr_store_write_file(store, store->root_fd, name, (uint8_t *)buf, n, sync);
}

/* The housekeeping job of gr_store_log_start_checkpoint_async. */
struct ls_ckpt {
    struct gr_store *store;
    char *data;
    size_t len;
    int64_t ticket;
    struct gr_log **logs; /* logs with a DeleteRecords in flight: their waiters are woken */
    int log_count;
};

static int ls_ckpt_job(void *arg)
{
    struct ls_ckpt *c = arg;
    struct gr_store *store = c->store;
    int err = gr_file_write_atomic(store->root_fd, CKPT_LOG_START, c->data, c->len);
    if (err < 0) {
        GR_WARN("storage: writing %s failed (%s)", CKPT_LOG_START, strerror(-err));
        atomic_store(&store->ls_ckpt_err, err);
    } else {
        atomic_store(&store->ls_ckpt_ok, c->ticket);
    }
    atomic_store(&store->ls_ckpt_done, c->ticket);
    for (int i = 0; i < c->log_count && store->cfg.on_flushed; i++)
        store->cfg.on_flushed(store->cfg.on_flushed_ctx, c->logs[i], gr_log_durable_offset(c->logs[i]), 0);
    free(c->logs);
    free(c->data);
    free(c);
    return err;
}

int gr_store_log_start_checkpoint_async(struct gr_store *store, int64_t *ticket)
{
    struct ls_ckpt *c = calloc(1, sizeof(*c));
    struct gr_job *job = c ? calloc(1, sizeof(*job)) : NULL;
    if (c) c->data = ckpt_format(store, value_log_start, &c->len);
    int waiting = 0;
    for (int i = 0; i < store->topic_count; i++)
        for (int32_t p = 0; p < store->topics[i]->partition_count; p++)
            waiting += store->topics[i]->logs[p] && store->topics[i]->logs[p]->ls_pending_ops > 0;
    if (c) c->logs = calloc((size_t)waiting + 1, sizeof(*c->logs));
    if (!job || !c->data || !c->logs) {
        if (c) {
            free(c->data);
            free(c->logs);
        }
        free(c);
        free(job);
        return -ENOMEM;
    }
    for (int i = 0; i < store->topic_count; i++)
        for (int32_t p = 0; p < store->topics[i]->partition_count; p++)
            if (store->topics[i]->logs[p] && store->topics[i]->logs[p]->ls_pending_ops > 0)
                c->logs[c->log_count++] = store->topics[i]->logs[p];
    c->store = store;
    c->ticket = *ticket = ++store->ls_ckpt_ticket;
    job->type = GR_JOB_CALL;
    job->dir_fd = -1;
    job->fn = ls_ckpt_job;
    job->arg = c;
    if (!store->fl.threads) c->log_count = 0; /* inline: the caller polls at once, nobody to wake */
    gr_flusher_job(store, job);
    return 0;
}

int gr_store_checkpoint_poll(struct gr_store *store, int64_t ticket)
{
    if (atomic_load(&store->ls_ckpt_ok) >= ticket) return 1;
    if (atomic_load(&store->ls_ckpt_done) < ticket) return 0;
    int err = atomic_load(&store->ls_ckpt_err);
    return err < 0 ? err : -EIO;
}

int gr_store_checkpoint_wait(struct gr_store *store, int64_t ticket)
{
    struct gr_flusher *fl = &store->fl;
    int r = gr_store_checkpoint_poll(store, ticket);
    if (r == 0 && fl->threads) {
        gr_sys_audit_note("wait for a checkpoint write", store->root_fd, CKPT_LOG_START);
        pthread_mutex_lock(&fl->mu);
        while ((r = gr_store_checkpoint_poll(store, ticket)) == 0)
            pthread_cond_wait(&fl->idle_cv, &fl->mu);
        pthread_mutex_unlock(&fl->mu);
    }
    return r > 0 ? 0 : r;
}

int gr_store_checkpoint_all(struct gr_store *store, bool sync)
{
    int err = ckpt_write(store, CKPT_RECOVERY, value_recovery, sync);
    int e2 = ckpt_write(store, CKPT_LOG_START, value_log_start, sync);
    int e3 = ckpt_write(store, CKPT_HWM, value_hwm, sync);
    if (e2 == 0) store->ls_checkpoint_dirty = false;
    err = err ? err : e2 ? e2 : e3;
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        for (int32_t p = 0; p < t->partition_count; p++) {
            if (!t->logs[p]) continue;
            int e = gr_log_write_epochs(t->logs[p], sync);
            if (err == 0) err = e;
        }
    }
    if (err < 0) GR_WARN("storage: writing checkpoints failed (%s)", strerror(-err));
    return err;
}

int gr_store_checkpoint(struct gr_store *store)
{
    return gr_store_checkpoint_all(store, false);
}

/* ---------------------------------------------------------------- meta.properties */

/* Reads or creates meta.properties: 0 read, 1 created, -errno. */
static int meta_properties(struct gr_store *store)
{
    char *buf;
    size_t len;
    int err = gr_file_read_all(store->root_fd, "meta.properties", 65536, &buf, &len);
    if (err == 0) {
        const char *cid = NULL;
        size_t cid_len = 0;
        int64_t node = -1;
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
            if (strncmp(line, "cluster.id=", 11) == 0) {
                cid = line + 11;
                cid_len = strlen(cid);
            } else if (strncmp(line, "node.id=", 8) == 0) {
                if (parse_long(line + 8, 0, INT32_MAX, &node) < 0) node = -1;
            }
        }
        uint8_t id[16];
        if (!cid || gr_uuid_from_base64url(cid, cid_len, id) < 0) {
            GR_ERROR("storage: %s/meta.properties has no valid cluster.id", store->log_dir);
            free(buf);
            return -EINVAL;
        }
        memcpy(store->cluster_id, cid, 22);
        store->cluster_id[22] = '\0';
        free(buf);
        if (node != store->cfg.node_id) {
            GR_ERROR("storage: stored node.id %" PRId64 " does not match configured node.id %d", node,
                     store->cfg.node_id);
            return -EINVAL;
        }
        return 0;
    }
    if (err != -ENOENT) return err;
    uint8_t id[16], dir_id[16];
    gr_uuid_random(id);
    gr_uuid_random(dir_id);
    char dir_text[23];
    gr_uuid_to_base64url(id, store->cluster_id);
    if (store->cfg.cluster_id) /* cluster mode: the id etcd holds */
        snprintf(store->cluster_id, sizeof store->cluster_id, "%s", store->cfg.cluster_id);
    gr_uuid_to_base64url(dir_id, dir_text);
    char text[256];
    int n = snprintf(text, sizeof(text),
                     "#\n#Written by Gregor\nnode.id=%d\ndirectory.id=%s\nversion=1\ncluster.id=%s\n",
                     store->cfg.node_id, dir_text, store->cluster_id);
    int werr = gr_file_write_atomic(store->root_fd, "meta.properties", text, (size_t)n);
    return werr < 0 ? werr : 1;
}

int gr_store_meta_cluster_id(const char *log_dir, char out[23])
{
    int dir_fd = open(log_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return errno == ENOENT ? 0 : -errno;
    char *buf;
    size_t len;
    int err = gr_file_read_all(dir_fd, "meta.properties", 65536, &buf, &len);
    close(dir_fd);
    if (err == -ENOENT) return 0;
    if (err < 0) return err;
    err = -EINVAL;
    for (char *save, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        uint8_t id[16];
        if (strncmp(line, "cluster.id=", 11) == 0 &&
            gr_uuid_from_base64url(line + 11, strlen(line + 11), id) == 0) {
            gr_uuid_to_base64url(id, out);
            err = 1;
        }
    }
    free(buf);
    return err;
}

/* ---------------------------------------------------------------- open */

static int config_check(const struct gr_store_config *cfg)
{
    if (!cfg->log_dir || !*cfg->log_dir || cfg->segment_bytes < 14 || cfg->segment_bytes > INT32_MAX ||
        cfg->segment_ms < 1 || cfg->retention_ms < -1 || cfg->index_interval_bytes < 0 ||
        cfg->segment_index_bytes < 4 || cfg->flush_interval_messages < 1 || cfg->flush_interval_ms < 0 ||
        cfg->max_message_bytes < 0 || cfg->flusher_threads < 1 || cfg->flusher_threads > 64 ||
        cfg->node_id < 0 || cfg->open_segment_fds_max < 1)
        return -EINVAL;
    return 0;
}

/* Opens a directory stream on a duplicate of `dir_fd` (which stays open). Returns 0 and *out, or -errno. */
static int dir_open(int dir_fd, DIR **out)
{
    gr_sys_audit_note("readdir", dir_fd, NULL);
    int fd = dup(dir_fd);
    if (fd < 0) return -errno;
    *out = fdopendir(fd);
    if (!*out) {
        int err = -errno;
        close(fd);
        return err;
    }
    return 0;
}

static int load_topics(struct gr_store *store)
{
    DIR *d;
    int derr = dir_open(store->topics_dir_fd, &d);
    if (derr < 0) return derr;
    int err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && err == 0) {
        size_t n = strlen(de->d_name);
        if (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0) {
            gr_sys_unlinkat(store->topics_dir_fd, de->d_name, 0);
            continue;
        }
        if (n <= 6 || strcmp(de->d_name + n - 6, ".topic") != 0) continue;
        char *buf;
        size_t len;
        err = gr_file_read_all(store->topics_dir_fd, de->d_name, TOPIC_FILE_BYTES_MAX, &buf, &len);
        if (err < 0) break;
        struct gr_topic *t;
        err = topic_file_parse(store, buf, len, &t);
        free(buf);
        if (err < 0) {
            GR_ERROR("storage: topic file %s/%s is invalid", TOPICS_DIR, de->d_name);
            break;
        }
        char id[23];
        gr_uuid_to_base64url(t->id, id);
        if (n - 6 != 22 || strncmp(id, de->d_name, 22) != 0 || topic_insert(store, t) < 0) {
            GR_ERROR("storage: topic file %s names topic %s", de->d_name, t->name);
            topic_free(t);
            err = -EINVAL;
        }
    }
    closedir(d);
    return err;
}

/* "<topic>-<partition>.<32 hex>-delete", the topic prefix shortened to fit 255 bytes (as Kafka does). */
static void delete_dir_name(char *out, size_t cap, const char *topic, int32_t partition)
{
    uint8_t u[16];
    gr_uuid_random(u);
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", u[i]);
    char suffix[64];
    int sl = snprintf(suffix, sizeof(suffix), "-%d.%s-delete", partition, hex);
    int prefix = (int)strlen(topic);
    if (prefix > 255 - sl) prefix = 255 - sl;
    snprintf(out, cap, "%.*s%s", prefix, topic, suffix);
}

static void queue_rmtree(struct gr_store *store, const char *dir_name)
{
    struct gr_job *job = calloc(1, sizeof(*job));
    int err = ENOMEM;
    if (job) {
        job->type = GR_JOB_RMTREE;
        job->dir_fd = dup(store->root_fd);
        if (job->dir_fd < 0) err = errno; /* EMFILE/ENFILE, reported as such */
        job->names = calloc(1, sizeof(char *));
        if (job->names && (job->names[0] = strdup(dir_name))) job->name_count = 1;
        if (job->dir_fd >= 0 && job->name_count == 1) {
            gr_flusher_job(store, job);
            return;
        }
        gr_job_free(job);
    }
    GR_WARN("storage: could not schedule removal of %s (%s): removed at the next open", dir_name,
            strerror(err));
}

/* A log directory without meta.properties is new: it may hold files, but a subdirectory (other than
 * lost+found and hidden ones) means somebody else's data, which Gregor would otherwise take for stray
 * partitions and remove. Returns 0, or -ENOTEMPTY (logged, naming the subdirectory), or -errno. */
static int refuse_foreign(struct gr_store *store)
{
    DIR *d;
    int derr = dir_open(store->root_fd, &d);
    if (derr < 0) return derr;
    int err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        struct stat st;
        if (name[0] == '.' || strcmp(name, "lost+found") == 0 || strcmp(name, TOPICS_DIR) == 0) continue;
        if (fstatat(store->root_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) continue;
        GR_ERROR("storage: %s has no meta.properties but holds the directory %s: not a Gregor log directory, "
                 "refusing to use it (point log.dirs at an empty or Gregor directory)",
                 store->log_dir, name);
        err = -ENOTEMPTY;
        break;
    }
    closedir(d);
    return err;
}

/* Classifies the log directory's subdirectories: finishes pending deletions, moves strays of Gregor's own
 * (partition directories of no topic: a crash during topic creation or deletion) aside, and refuses a
 * directory that is not a partition directory (-ENOTEMPTY). */
static int scan_root(struct gr_store *store, char ***pending, int *pending_count)
{
    DIR *d;
    int derr = dir_open(store->root_fd, &d);
    if (derr < 0) return derr;
    int err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && err == 0) {
        const char *name = de->d_name;
        if (name[0] == '.' || strcmp(name, TOPICS_DIR) == 0) continue;
        struct stat st;
        if (fstatat(store->root_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) continue;
        size_t n = strlen(name);
        if (n > 7 && strcmp(name + n - 7, "-delete") == 0) {
            err = push_str(pending, pending_count, name, n);
            continue;
        }
        if (strcmp(name, "lost+found") == 0) continue; /* a file system's, at a mount point */
        const char *dash = strrchr(name, '-');
        int64_t part = -1;
        if (dash && dash != name) parse_long(dash + 1, 0, INT32_MAX, &part);
        char topic[GR_TOPIC_NAME_BYTES_MAX + 1];
        size_t tl = dash ? (size_t)(dash - name) : 0;
        if (tl < sizeof topic) {
            memcpy(topic, name, tl);
            topic[tl] = 0;
        }
        if (part < 0 || tl == 0 || tl >= sizeof topic || !topic_name_valid(topic)) {
            /* Not ours (Kafka refuses such a directory too): never delete what Gregor did not write. */
            GR_ERROR(
                "storage: %s/%s is not a partition directory (<topic>-<partition>): refusing to use this "
                "log directory; move it elsewhere",
                store->log_dir, name);
            err = -ENOTEMPTY;
            break;
        }
        struct gr_topic *t = part >= 0 ? gr_store_topic_find(store, name, (size_t)(dash - name)) : NULL;
        if (t && part < t->partition_count) continue;
        GR_WARN("storage: %s/%s belongs to no topic: removing it", store->log_dir, name);
        char aside[300];
        delete_dir_name(aside, sizeof(aside), name, (int32_t)part);
        if (gr_sys_renameat(store->root_fd, name, store->root_fd, aside) == 0)
            err = push_str(pending, pending_count, aside, strlen(aside));
    }
    closedir(d);
    return err;
}

static int ckpt_load(struct gr_store *store, const char *name, struct gr_ckpt_entry **e, int *n)
{
    int err = gr_ckpt_read(store->root_fd, name, e, n);
    if (err == -ENOENT || err == -EINVAL) {
        if (err == -EINVAL) GR_WARN("storage: %s/%s is malformed, ignored", store->log_dir, name);
        *e = NULL;
        *n = 0;
        return 0;
    }
    return err;
}

/* True when the directory "<topic>-<p>" exists (a sparse topic holds exactly those partitions). */
static bool partition_dir_exists(struct gr_store *store, const struct gr_topic *t, int32_t p)
{
    char dir[GR_TOPIC_NAME_BYTES_MAX + 16];
    snprintf(dir, sizeof(dir), "%s-%d", t->name, p);
    struct stat st;
    return fstatat(store->root_fd, dir, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

static int load_logs(struct gr_store *store, bool clean)
{
    struct gr_ckpt_entry *rp = NULL, *ls = NULL, *hw = NULL;
    int nrp = 0, nls = 0, nhw = 0;
    int err = ckpt_load(store, CKPT_RECOVERY, &rp, &nrp);
    if (err == 0) err = ckpt_load(store, CKPT_LOG_START, &ls, &nls);
    if (err == 0) err = ckpt_load(store, CKPT_HWM, &hw, &nhw);
    for (int i = 0; err == 0 && i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        t->logs = calloc((size_t)t->partition_count, sizeof(*t->logs));
        if (!t->logs) {
            err = -ENOMEM;
            break;
        }
        for (int32_t p = 0; err == 0 && p < t->partition_count; p++) {
            if (t->sparse && !partition_dir_exists(store, t, p)) continue; /* not held here */
            int64_t crp = gr_ckpt_lookup(rp, nrp, t->name, p), cls = gr_ckpt_lookup(ls, nls, t->name, p),
                    chw = gr_ckpt_lookup(hw, nhw, t->name, p);
            err = gr_log_load(store, t, p, clean, crp, cls, chw, &t->logs[p]);
            if (err < 0 && err != -ENOMEM) {
                /* One partition that cannot open goes offline; the rest of the directory serves (Kafka
                   takes a whole log directory offline; with one directory that would stop the broker,
                   and with it DeleteTopics, DeleteRecords and retention, the operator's ways to free
                   space). The error was logged by gr_log_load. */
                GR_ERROR("storage: %s-%d: offline (%s); its files are left as they are", t->name, p,
                         strerror(-err));
                store->offline_at_open++;
                err = gr_log_new_offline(store, t, p, crp, cls, chw, &t->logs[p]);
            }
        }
    }
    gr_ckpt_free(rp, nrp);
    gr_ckpt_free(ls, nls);
    gr_ckpt_free(hw, nhw);
    return err;
}

static void store_free(struct gr_store *store)
{
    for (int i = 0; i < store->topic_count; i++)
        topic_free(store->topics[i]);
    for (int i = 0; i < store->dead_count; i++)
        topic_free(store->dead[i]);
    for (int i = 0; i < store->dead_log_count; i++)
        gr_log_free(store->dead_logs[i]);
    free(store->topics);
    free(store->dead);
    free(store->dead_logs);
    gr_sys_close(store->topics_dir_fd);
    gr_sys_close(store->root_fd);
    free(store->log_dir);
    free(store->log_dir_abs);
    free(store->log_dir_real);
    free(store);
}

int gr_store_open(const struct gr_store_config *cfg, struct gr_store **out)
{
    int err = config_check(cfg);
    if (err < 0) return err;
    struct gr_store *store = calloc(1, sizeof(*store));
    if (!store) return -ENOMEM;
    store->cfg = *cfg;
    store->root_fd = store->topics_dir_fd = -1;
    store->log_dir = strdup(cfg->log_dir);
    store->cfg.log_dir = store->log_dir;
    store_defaults_cfg(&store->cfg, &store->defaults);
    char **pending = NULL;
    int npending = 0;
    bool clean = false;
    if (!store->log_dir) {
        err = -ENOMEM;
        goto fail;
    }
    err = gr_sys_mkdirat(AT_FDCWD, store->log_dir, 0755);
    if (err < 0 && err != -EEXIST) goto fail;
    if ((err = store->root_fd = gr_sys_openat(AT_FDCWD, store->log_dir, O_RDONLY | O_DIRECTORY, 0)) < 0)
        goto fail;
    if ((err = gr_store_log_dir_names(store)) < 0) goto fail;
    bool fresh = false;
    if (faccessat(store->root_fd, "meta.properties", F_OK, 0) < 0 && (err = refuse_foreign(store)) < 0)
        goto fail;
    if ((err = meta_properties(store)) < 0) goto fail;
    fresh = err == 1;
    clean = faccessat(store->root_fd, CLEAN_MARKER, F_OK, 0) == 0;
    err = gr_sys_mkdirat(store->root_fd, TOPICS_DIR, 0755);
    if (err < 0 && err != -EEXIST) goto fail;
    if ((err = store->topics_dir_fd = gr_sys_openat(store->root_fd, TOPICS_DIR, O_RDONLY | O_DIRECTORY, 0)) <
        0)
        goto fail;
    if ((err = load_topics(store)) < 0 || (err = scan_root(store, &pending, &npending)) < 0) goto fail;
    if ((err = load_logs(store, clean)) < 0) goto fail;
    gr_cleaner_load_checkpoint(store);
    if (clean) {
        /* From here on a crash must trigger recovery again. */
        if ((err = gr_sys_unlinkat(store->root_fd, CLEAN_MARKER, 0)) < 0 ||
            (err = gr_dir_sync(store->root_fd)) < 0)
            goto fail;
    } else if ((err = gr_dir_sync(store->root_fd)) < 0) {
        goto fail;
    }
    if ((err = gr_flusher_start(store)) < 0) goto fail;
    for (int i = 0; i < npending; i++)
        queue_rmtree(store, pending[i]);
    free_strings(pending, npending);
    GR_INFO("storage: opened %s (%s): %d topics, cluster id %s", store->log_dir,
            fresh   ? "new"
            : clean ? "clean shutdown"
                    : "unclean shutdown",
            store->topic_count, store->cluster_id);
    if (store->offline_at_open)
        GR_ERROR("storage: %d partitions could not be opened and are offline (KAFKA_STORAGE_ERROR) until a "
                 "restart opens them or DeleteTopics removes them",
                 store->offline_at_open);
    *out = store;
    return 0;
fail:
    GR_ERROR("storage: opening %s failed (%s)", cfg->log_dir, strerror(-err));
    free_strings(pending, npending);
    store_free(store);
    return err;
}

void gr_store_quiesce(struct gr_store *store)
{
    gr_flusher_quiesce(store);
}

void gr_store_close(struct gr_store *store)
{
    if (!store) return;
    if (store->op_running || store->ops_head) /* the owner drains its I/O pool first (server/main.c) */
        GR_ERROR("storage: closing with %d topic operations not completed (their I/O pool was not drained)",
                 gr_store_topic_ops_pending(store));
    gr_cleaner_stop(store); /* before the flushers: its last swap finishes on the housekeeping thread */
    gr_flusher_stop(store);
    bool clean = true;
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        for (int32_t p = 0; p < t->partition_count; p++)
            if (t->logs[p] && gr_log_close_clean(t->logs[p]) < 0) clean = false;
    }
    if (gr_store_checkpoint_all(store, true) < 0) clean = false;
    if (clean && gr_file_write_atomic(store->root_fd, CLEAN_MARKER, "", 0) < 0) clean = false;
    GR_INFO("storage: closed %s (%s)", store->log_dir, clean ? "clean" : "NOT clean: recovery at next open");
    store_free(store);
}

/* ---------------------------------------------------------------- topic operations
 *
 * Create, delete, grow and config changes run as begin (network thread: checks against the live state,
 * allocation, reservation, the topic file formatted), run (any thread: file work on the op's private state
 * only: directories, segment files, partition.metadata, epochs, the topic file, fsyncs) and finish (network
 * thread: publish or drop). The store's FIFO runs one at a time (gr_store_topic_op_submit). The synchronous
 * gr_store_topic_* functions are the three steps in a row. Orders of file operations, and so the crash
 * states, are those of the synchronous code before the split:
 *   create: partition directories (each made durable: mkdir + root fsync, files, dir fsync), then the topic
 *           file (commit point); a crash before it leaves strays, removed at the next open;
 *   delete: the topic file unlinked + fsync (commit point), then the directories renamed "-delete"
 *           (removed at the next open if the crash came first), root fsync;
 *   grow:   the new partition directories, then the topic file with the new count (commit point);
 *   config: the topic file replaced atomically;
 *   sparse topics (cluster mode): create and grow write only the topic file; replica make creates one
 *           partition directory (its partition.metadata names the topic id; the directory is the commit
 *           point: at open a sparse topic holds the partitions whose directory exists); replica delete
 *           renames one directory "-delete" (the commit point) and the root is fsynced.
 */

enum topic_op_kind {
    OP_CREATE,
    OP_DELETE,
    OP_GROW,
    OP_CONFIG,
    OP_BARRIER,
    OP_META,
    OP_REPLICA_MAKE,
    OP_REPLICA_DELETE
};

struct gr_topic_op {
    struct gr_io_job job; /* first: the pool hands it back */
    enum topic_op_kind kind;
    struct gr_store *store;
    struct gr_iopool *pool;
    gr_topic_op_cb cb;
    void *cb_ctx;
    struct gr_topic_op *next; /* store FIFO */
    /* arguments */
    char *name;
    int32_t partitions; /* create: count; grow: new total */
    char **keys, **values;
    int count;
    bool refuse_collision;
    bool keep_active_open; /* create: gr_topic_op_keep_active_open */
    bool sparse;           /* create: a sparse topic (gr_topic_op_create_sparse) with the id below */
    uint8_t id[16];
    int32_t partition;      /* replica make/delete: the partition */
    struct gr_topic *topic; /* create: the new private topic; others: the target */
    /* prepared by begin, used by run (borrowed store fds never change while the store is open) */
    bool begun;
    int result; /* begin's error, then run's */
    int root_fd, topics_dir_fd;
    int32_t from, to;     /* partitions whose logs are created (create, grow) or renamed (delete) */
    struct gr_log **logs; /* [to - from]: created by run */
    char *file;           /* topic file content (create, grow, config) */
    size_t file_len;
    char fname[32];           /* "<id>.topic" */
    struct gr_log_config cfg; /* config: the new effective config */
    char **aside;             /* directories run renamed to "-delete": finish schedules their removal */
    int aside_count;
};

static void op_free_logs(struct gr_topic_op *op)
{
    for (int32_t i = 0; op->logs && i < op->to - op->from; i++)
        gr_log_free(op->logs[i]);
    free(op->logs);
    op->logs = NULL;
}

void gr_topic_op_free(struct gr_topic_op *op)
{
    if (!op) return;
    op_free_logs(op);
    if (op->kind == OP_CREATE) topic_free(op->topic); /* still private: never published */
    free(op->name);
    free_strings(op->keys, op->count);
    free_strings(op->values, op->count);
    free(op->file);
    free_strings(op->aside, op->aside_count);
    free(op);
}

static struct gr_topic_op *op_new(enum topic_op_kind kind, const char *const *keys, const char *const *values,
                                  int count)
{
    struct gr_topic_op *op = calloc(1, sizeof(*op));
    if (!op) return NULL;
    op->kind = kind;
    op->root_fd = op->topics_dir_fd = -1;
    if (count < 0 || (count > 0 && (!keys || !values))) {
        op->result = -EINVAL; /* reported by begin */
        return op;
    }
    for (int i = 0; i < count; i++)
        if (!keys[i] || !values[i]) {
            op->result = -EINVAL;
            return op;
        }
    if (copy_strings(keys, count, &op->keys) < 0 || copy_strings(values, count, &op->values) < 0) {
        free_strings(op->keys, count);
        free(op);
        return NULL;
    }
    op->count = count;
    return op;
}

struct gr_topic_op *gr_topic_op_create(const char *name, int32_t partitions, const char *const *config_keys,
                                       const char *const *config_values, int config_count,
                                       bool refuse_collision)
{
    struct gr_topic_op *op = op_new(OP_CREATE, config_keys, config_values, config_count);
    if (!op) return NULL;
    op->partitions = partitions;
    op->refuse_collision = refuse_collision;
    if (!name)
        op->result = -EINVAL;
    else if (!(op->name = strdup(name))) {
        gr_topic_op_free(op);
        return NULL;
    }
    return op;
}

struct gr_topic_op *gr_topic_op_create_sparse(const char *name, const uint8_t id[16], int32_t partitions,
                                              const char *const *config_keys,
                                              const char *const *config_values, int config_count)
{
    struct gr_topic_op *op =
        gr_topic_op_create(name, partitions, config_keys, config_values, config_count, false);
    if (!op) return NULL;
    op->sparse = true;
    memcpy(op->id, id, 16);
    return op;
}

static struct gr_topic_op *op_replica(enum topic_op_kind kind, struct gr_topic *topic, int32_t partition)
{
    struct gr_topic_op *op = op_new(kind, NULL, NULL, 0);
    if (!op) return NULL;
    op->topic = topic;
    op->partition = partition;
    return op;
}

struct gr_topic_op *gr_topic_op_replica_make(struct gr_topic *topic, int32_t partition)
{
    return op_replica(OP_REPLICA_MAKE, topic, partition);
}

struct gr_topic_op *gr_topic_op_replica_delete(struct gr_topic *topic, int32_t partition)
{
    return op_replica(OP_REPLICA_DELETE, topic, partition);
}

bool gr_topic_sparse(const struct gr_topic *t)
{
    return t->sparse;
}

void gr_topic_op_keep_active_open(struct gr_topic_op *op)
{
    op->keep_active_open = true;
}

struct gr_topic_op *gr_topic_op_delete(struct gr_topic *topic)
{
    struct gr_topic_op *op = op_new(OP_DELETE, NULL, NULL, 0);
    if (op) op->topic = topic;
    return op;
}

struct gr_topic_op *gr_topic_op_add_partitions(struct gr_topic *topic, int32_t new_total)
{
    struct gr_topic_op *op = op_new(OP_GROW, NULL, NULL, 0);
    if (!op) return NULL;
    op->topic = topic;
    op->partitions = new_total;
    return op;
}

struct gr_topic_op *gr_topic_op_set_configs(struct gr_topic *topic, const char *const *keys,
                                            const char *const *values, int count)
{
    struct gr_topic_op *op = op_new(OP_CONFIG, keys, values, count);
    if (op) op->topic = topic;
    return op;
}

struct gr_topic_op *gr_topic_op_barrier(void)
{
    return op_new(OP_BARRIER, NULL, NULL, 0);
}

struct gr_topic_op *gr_topic_op_meta_write(const char *name, const void *data, size_t len)
{
    struct gr_topic_op *op = op_new(OP_META, NULL, NULL, 0);
    if (!op) return NULL;
    op->name = strdup(name);
    op->file = malloc(len ? len : 1);
    if (!op->name || !op->file) {
        gr_topic_op_free(op);
        return NULL;
    }
    memcpy(op->file, data, len);
    op->file_len = len;
    return op;
}

void gr_store_set_defaults(struct gr_store *store, const struct gr_store_config *cfg)
{
    struct gr_store_config *sc = &store->cfg;
    sc->segment_bytes = cfg->segment_bytes;
    sc->segment_ms = cfg->segment_ms;
    sc->retention_ms = cfg->retention_ms;
    sc->retention_bytes = cfg->retention_bytes;
    sc->index_interval_bytes = cfg->index_interval_bytes;
    sc->segment_index_bytes = cfg->segment_index_bytes;
    sc->flush_interval_messages = cfg->flush_interval_messages;
    sc->flush_interval_ms = cfg->flush_interval_ms;
    sc->max_message_bytes = cfg->max_message_bytes;
    sc->delete_retention_ms = cfg->delete_retention_ms;
    sc->min_cleanable_ratio = cfg->min_cleanable_ratio;
    sc->min_compaction_lag_ms = cfg->min_compaction_lag_ms;
    sc->max_compaction_lag_ms = cfg->max_compaction_lag_ms;
    sc->cleanup_delete = cfg->cleanup_delete;
    sc->cleanup_compact = cfg->cleanup_compact;
    sc->log_append_time = cfg->log_append_time;
    sc->timestamp_before_max_ms = cfg->timestamp_before_max_ms;
    sc->timestamp_after_max_ms = cfg->timestamp_after_max_ms;
    sc->compression_type = cfg->compression_type;
    store_defaults_cfg(sc, &store->defaults);
    for (int i = 0; i < store->topic_count; i++)
        gr_log_config_effective(store, store->topics[i]);
}

/* Kafka's Topic.hasCollision: equal once '.' and '_' are treated alike, but not identical. */
static bool names_collide(const char *a, const char *b)
{
    if (strlen(a) != strlen(b) || strcmp(a, b) == 0) return false;
    for (; *a; a++, b++) {
        char x = *a == '_' ? '.' : *a, y = *b == '_' ? '.' : *b;
        if (x != y) return false;
    }
    return true;
}

static int topics_reserve(struct gr_store *store, int extra)
{
    if (store->topic_count + extra <= store->topic_cap) return 0;
    int ncap = store->topic_cap ? store->topic_cap * 2 : 16;
    struct gr_topic **n = realloc(store->topics, sizeof(*n) * (size_t)ncap);
    if (!n) return -ENOMEM;
    store->topics = n;
    store->topic_cap = ncap;
    return 0;
}

static int begin_create(struct gr_store *store, struct gr_topic_op *op)
{
    if (!topic_name_valid(op->name) || op->partitions < 1 || op->partitions > GR_PARTITIONS_PER_TOPIC_MAX)
        return -EINVAL;
    struct gr_log_config cfg;
    if (configs_check(store, (const char *const *)op->keys, (const char *const *)op->values, op->count,
                      &cfg) < 0)
        return -EINVAL;
    if (gr_store_topic_find(store, op->name, strlen(op->name))) return -EEXIST;
    static const uint8_t zero[16];
    if (op->sparse && (memcmp(op->id, zero, 16) == 0 || gr_store_topic_find_id(store, op->id)))
        return -EEXIST;
    if (op->refuse_collision)
        for (int i = 0; i < store->topic_count; i++)
            if (names_collide(op->name, store->topics[i]->name)) return -ENOTUNIQ;
    if (topics_reserve(store, 1) < 0) return -ENOMEM; /* finish's insert cannot fail */
    struct gr_topic *t = calloc(1, sizeof(*t));
    if (!t) return -ENOMEM;
    op->topic = t; /* freed with the op unless finish publishes it */
    t->store = store;
    t->cfg = cfg;
    t->name = op->name;
    op->name = NULL;
    t->config_keys = op->keys;
    t->config_values = op->values;
    t->config_count = op->count;
    op->keys = op->values = NULL;
    op->count = 0;
    if (op->sparse)
        memcpy(t->id, op->id, 16);
    else
        gr_uuid_random(t->id);
    t->sparse = op->sparse;
    if (!(t->logs = calloc((size_t)op->partitions, sizeof(*t->logs)))) return -ENOMEM;
    /* partition_count stays 0 until finish: topic_free frees only published logs */
    op->from = 0;
    op->to = op->sparse ? 0 : op->partitions; /* a sparse topic starts with no partition held */
    return topic_file_format(t, op->partitions, t->config_keys, t->config_values, t->config_count, &op->file,
                             &op->file_len, op->fname);
}

static int begin_delete(struct gr_store *store, struct gr_topic_op *op)
{
    struct gr_topic *t = op->topic;
    int i = t ? topic_search(store, t->name, strlen(t->name)) : -1;
    if (i < 0 || store->topics[i] != t) return -ENOENT;
    if (store->dead_count == store->dead_cap) { /* finish's move to the dead list cannot fail */
        int ncap = store->dead_cap ? store->dead_cap * 2 : 8;
        struct gr_topic **n = realloc(store->dead, sizeof(*n) * (size_t)ncap);
        if (!n) return -ENOMEM;
        store->dead = n;
        store->dead_cap = ncap;
    }
    if (!(op->name = strdup(t->name))) return -ENOMEM;
    char id[23];
    gr_uuid_to_base64url(t->id, id);
    snprintf(op->fname, sizeof(op->fname), "%s.topic", id);
    op->from = 0;
    op->to = t->partition_count;
    op->sparse = t->sparse;
    return 0;
}

static int begin_grow(struct gr_store *store, struct gr_topic_op *op)
{
    (void)store;
    struct gr_topic *t = op->topic;
    int32_t old = t->partition_count;
    if (t->deleted || op->partitions <= old || op->partitions > GR_PARTITIONS_PER_TOPIC_MAX) return -EINVAL;
    struct gr_log **logs = realloc(t->logs, sizeof(*logs) * (size_t)op->partitions); /* finish cannot fail */
    if (!logs) return -ENOMEM;
    t->logs = logs;
    for (int32_t p = old; p < op->partitions; p++)
        logs[p] = NULL;                          /* beyond partition_count until finish */
    op->from = t->sparse ? op->partitions : old; /* a sparse topic's new partitions are not held */
    op->to = op->partitions;
    if (!(op->logs = calloc((size_t)(op->to - op->from) + 1, sizeof(*op->logs)))) return -ENOMEM;
    return topic_file_format(t, op->partitions, t->config_keys, t->config_values, t->config_count, &op->file,
                             &op->file_len, op->fname);
}

static int begin_config(struct gr_store *store, struct gr_topic_op *op)
{
    struct gr_topic *t = op->topic;
    if (t->deleted) return -ENOENT;
    if (configs_check(store, (const char *const *)op->keys, (const char *const *)op->values, op->count,
                      &op->cfg) < 0)
        return -EINVAL;
    return topic_file_format(t, t->partition_count, op->keys, op->values, op->count, &op->file, &op->file_len,
                             op->fname);
}

static int begin_replica(struct gr_store *store, struct gr_topic_op *op)
{
    struct gr_topic *t = op->topic;
    int32_t p = op->partition;
    if (!t || t->deleted) return -ENOENT;
    if (!t->sparse || p < 0 || p >= t->partition_count) return -EINVAL;
    if (op->kind == OP_REPLICA_MAKE) {
        if (t->logs[p]) return -EEXIST;
        op->from = p;
        op->to = p + 1;
        return (op->logs = calloc(1, sizeof(*op->logs))) ? 0 : -ENOMEM;
    }
    if (!t->logs[p]) return -ENOENT;
    if (store->dead_log_count == store->dead_log_cap) { /* finish's move to the dead list cannot fail */
        int ncap = store->dead_log_cap ? store->dead_log_cap * 2 : 16;
        struct gr_log **n = realloc(store->dead_logs, sizeof(*n) * (size_t)ncap);
        if (!n) return -ENOMEM;
        store->dead_logs = n;
        store->dead_log_cap = ncap;
    }
    return (op->name = strdup(t->name)) ? 0 : -ENOMEM;
}

int gr_topic_op_begin(struct gr_store *store, struct gr_topic_op *op)
{
    op->store = store;
    op->begun = true;
    op->root_fd = store->root_fd;
    op->topics_dir_fd = store->topics_dir_fd;
    if (op->result < 0) return op->result; /* bad arguments seen by the constructor */
    int err;
    switch (op->kind) {
    case OP_CREATE:
        err = begin_create(store, op);
        break;
    case OP_DELETE:
        err = begin_delete(store, op);
        break;
    case OP_GROW:
        err = begin_grow(store, op);
        break;
    case OP_CONFIG:
        err = begin_config(store, op);
        break;
    case OP_REPLICA_MAKE:
    case OP_REPLICA_DELETE:
        err = begin_replica(store, op);
        break;
    default:
        err = 0;
        break; /* barrier */
    }
    if (op->kind == OP_CREATE && err == 0 && !(op->logs = calloc((size_t)op->to + 1, sizeof(*op->logs))))
        err = -ENOMEM;
    op->result = err;
    return err;
}

/* Run side: renames `dir` (a name in the log directory) to the "-delete" form and remembers the new name
   for finish, which schedules its removal. Returns 0, -ENOENT (nothing there) or -errno. */
static int run_move_aside(struct gr_topic_op *op, const char *dir, const char *topic, int32_t partition)
{
    char aside[300];
    delete_dir_name(aside, sizeof(aside), topic, partition);
    int err = gr_sys_renameat(op->root_fd, dir, op->root_fd, aside);
    if (err < 0) return err;
    if (push_str(&op->aside, &op->aside_count, aside, strlen(aside)) < 0)
        GR_WARN("storage: %s: out of memory, removed at the next open", aside); /* a stray: cleaned at open */
    return 0;
}

/* Run side of a failed create/grow: frees the new logs and moves their directories aside. */
static void run_unload(struct gr_topic_op *op, const char *topic)
{
    for (int32_t p = op->from; p < op->to; p++) {
        struct gr_log **slot = &op->logs[p - op->from];
        if (*slot) {
            gr_log_free(*slot);
            *slot = NULL;
        }
        char dir[GR_TOPIC_NAME_BYTES_MAX + 16];
        snprintf(dir, sizeof(dir), "%s-%d", topic, p);
        run_move_aside(op, dir, topic, p);
    }
}

static int run_new_logs(struct gr_topic_op *op)
{
    struct gr_topic *t = op->topic;
    for (int32_t p = op->from; p < op->to; p++) {
        char dir[GR_TOPIC_NAME_BYTES_MAX + 16];
        snprintf(dir, sizeof(dir), "%s-%d", t->name, p);
        int err = run_move_aside(op, dir, t->name, p); /* a leftover of an older incarnation */
        if (err < 0 && err != -ENOENT) return err;
        if ((err = gr_log_create_new(op->store, t, p, &op->logs[p - op->from])) < 0) return err;
    }
    return 0;
}

static int run_create_or_grow(struct gr_topic_op *op)
{
    int err = run_new_logs(op);
    if (err == 0) err = gr_file_write_atomic(op->topics_dir_fd, op->fname, op->file, op->file_len);
    if (err < 0) {
        if (op->kind == OP_CREATE) /* the file may have been renamed in before a failed fsync: not a topic */
            gr_sys_unlinkat(op->topics_dir_fd, op->fname, 0);
        run_unload(op, op->topic->name);
    }
    return err;
}

static int run_delete(struct gr_topic_op *op)
{
    int err = gr_sys_unlinkat(op->topics_dir_fd, op->fname, 0);
    if (err == 0) err = gr_dir_sync(op->topics_dir_fd);
    if (err < 0) return err; /* the topic file is the commit point: the topic stays live */
    for (int32_t p = op->from; p < op->to; p++) {
        char dir[GR_TOPIC_NAME_BYTES_MAX + 16];
        snprintf(dir, sizeof(dir), "%s-%d", op->name, p);
        int e = run_move_aside(op, dir, op->name, p);
        if (e == -ENOENT && op->sparse) continue; /* a partition the sparse topic does not hold */
        if (e < 0)                                /* removed as a stray at the next open */
            GR_WARN("storage: renaming %s for deletion failed (%s)", dir, strerror(-e));
    }
    gr_dir_sync(op->root_fd);
    return 0;
}

void gr_topic_op_run(struct gr_topic_op *op)
{
    if (!op->begun || op->result < 0) return;
    switch (op->kind) {
    case OP_CREATE:
    case OP_GROW:
        op->result = run_create_or_grow(op);
        break;
    case OP_DELETE:
        op->result = run_delete(op);
        break;
    case OP_CONFIG:
        op->result = gr_file_write_atomic(op->topics_dir_fd, op->fname, op->file, op->file_len);
        break;
    case OP_META:
        op->result = gr_file_write_atomic(op->root_fd, op->name, op->file, op->file_len);
        break;
    case OP_REPLICA_MAKE:
        if ((op->result = run_new_logs(op)) < 0) run_unload(op, op->topic->name);
        break;
    case OP_REPLICA_DELETE: {
        char dir[GR_TOPIC_NAME_BYTES_MAX + 16];
        snprintf(dir, sizeof(dir), "%s-%d", op->name, op->partition);
        op->result = run_move_aside(op, dir, op->name, op->partition); /* the commit point */
        if (op->result == 0) gr_dir_sync(op->root_fd);
        break;
    }
    default:
        break; /* barrier */
    }
}

int gr_topic_op_finish(struct gr_store *store, struct gr_topic_op *op, struct gr_topic **topic)
{
    if (topic) *topic = NULL;
    for (int i = 0; i < op->aside_count; i++)
        queue_rmtree(store, op->aside[i]);
    free_strings(op->aside, op->aside_count);
    op->aside = NULL;
    op->aside_count = 0;
    int err = op->begun ? op->result : -EINVAL;
    struct gr_topic *t = op->topic;
    if (err < 0) {
        const char *name = t ? t->name : op->name ? op->name : "?";
        if (op->kind == OP_CREATE && err != -EEXIST && err != -EINVAL && err != -ENOTUNIQ)
            GR_WARN("storage: creating topic %s failed (%s)", name, strerror(-err));
        else if (op->kind == OP_GROW && err != -EINVAL)
            GR_WARN("storage: adding partitions to topic %s failed (%s)", name, strerror(-err));
        return err;
    }
    switch (op->kind) {
    case OP_CREATE:
        for (int32_t p = 0; p < op->to; p++) {
            t->logs[p] = op->logs[p];
            t->logs[p]->active_fd_kept = op->keep_active_open;
            gr_log_files_admit(t->logs[p]); /* its open file counts against the fd cap from now on */
        }
        free(op->logs);
        op->logs = NULL;
        t->partition_count = op->partitions;
        topic_insert(store, t); /* cannot fail: reserved by begin, and begin checked the name */
        op->topic = NULL;       /* published */
        break;
    case OP_GROW:
        for (int32_t p = op->from; p < op->to; p++) {
            t->logs[p] = op->logs[p - op->from];
            gr_log_files_admit(t->logs[p]);
        }
        free(op->logs);
        op->logs = NULL;
        t->partition_count = op->to;
        break;
    case OP_REPLICA_MAKE:
        t->logs[op->partition] = op->logs[0];
        op->logs[0] = NULL;
        gr_log_files_admit(t->logs[op->partition]);
        GR_INFO("storage: made the local log of %s-%d", t->name, op->partition);
        break;
    case OP_REPLICA_DELETE:
        gr_log_mark_deleted(t->logs[op->partition]);
        store->dead_logs[store->dead_log_count++] = t->logs[op->partition]; /* reserved by begin */
        t->logs[op->partition] = NULL;
        GR_INFO("storage: deleted the local log of %s-%d", t->name, op->partition);
        break;
    case OP_DELETE: {
        for (int32_t p = 0; p < t->partition_count; p++)
            if (t->logs[p]) gr_log_mark_deleted(t->logs[p]);
        int i = topic_search(store, t->name, strlen(t->name)); /* live: nothing else changed the list */
        memmove(store->topics + i, store->topics + i + 1,
                sizeof(*store->topics) * (size_t)(store->topic_count - i - 1));
        store->topic_count--;
        t->deleted = true;
        store->dead[store->dead_count++] = t; /* reserved by begin */
        GR_INFO("storage: deleted topic %s", t->name);
        break;
    }
    case OP_BARRIER:
    case OP_META:
        t = NULL;
        break;
    default:
        free_strings(t->config_keys, t->config_count);
        free_strings(t->config_values, t->config_count);
        t->config_keys = op->keys;
        t->config_values = op->values;
        t->config_count = op->count;
        op->keys = op->values = NULL;
        op->count = 0;
        t->cfg = op->cfg;
        break;
    }
    if (t && store->cfg.on_topic_changed)
        store->cfg.on_topic_changed(store->cfg.on_topic_changed_ctx, t, op->kind == OP_DELETE);
    if (topic) *topic = t;
    return 0;
}

/* The three steps in a row, on the caller's thread (the synchronous API). */
static int op_sync(struct gr_store *store, struct gr_topic_op *op, struct gr_topic **out)
{
    if (!op) return -ENOMEM;
    gr_topic_op_begin(store, op);
    gr_topic_op_run(op);
    int err = gr_topic_op_finish(store, op, out);
    gr_topic_op_free(op);
    return err;
}

int gr_store_topic_create(struct gr_store *store, const char *name, int32_t partitions,
                          const char *const *config_keys, const char *const *config_values, int config_count,
                          struct gr_topic **out)
{
    return op_sync(
        store, gr_topic_op_create(name, partitions, config_keys, config_values, config_count, false), out);
}

int gr_store_topic_delete(struct gr_store *store, struct gr_topic *t)
{
    return op_sync(store, gr_topic_op_delete(t), NULL);
}

int gr_store_topic_add_partitions(struct gr_store *store, struct gr_topic *t, int32_t new_total)
{
    return op_sync(store, gr_topic_op_add_partitions(t, new_total), NULL);
}

int gr_topic_config_set_all(struct gr_store *store, struct gr_topic *t, const char *const *keys,
                            const char *const *values, int count)
{
    return op_sync(store, gr_topic_op_set_configs(t, keys, values, count), NULL);
}

/* ---- the FIFO: one operation at a time */

static void op_complete(struct gr_store *store, struct gr_topic_op *op)
{
    struct gr_topic *t;
    int err = gr_topic_op_finish(store, op, &t);
    if (op->cb) op->cb(op->cb_ctx, err, t);
    gr_topic_op_free(op);
}

static void ops_pump(struct gr_store *store);

static void op_job_run(struct gr_io_job *job)
{
    gr_topic_op_run((struct gr_topic_op *)job);
}

static void op_job_done(struct gr_io_job *job)
{
    struct gr_topic_op *op = (struct gr_topic_op *)job;
    struct gr_store *store = op->store;
    store->op_running = NULL;
    op_complete(store, op);
    ops_pump(store);
}

static void ops_pump(struct gr_store *store)
{
    if (store->ops_pumping) return; /* a callback submitted: the loop below takes it */
    store->ops_pumping = true;
    while (!store->op_running && store->ops_head) {
        struct gr_topic_op *op = store->ops_head;
        store->ops_head = op->next;
        if (!store->ops_head) store->ops_tail = NULL;
        if (gr_topic_op_begin(store, op) < 0 || !op->pool) {
            gr_topic_op_run(op); /* nothing to do after a begin error */
            op_complete(store, op);
            continue;
        }
        store->op_running = op;
        op->job = (struct gr_io_job){.run = op_job_run, .done = op_job_done};
        gr_iopool_submit(op->pool, &op->job);
    }
    store->ops_pumping = false;
}

void gr_store_topic_op_submit(struct gr_store *store, struct gr_iopool *pool, struct gr_topic_op *op,
                              gr_topic_op_cb cb, void *ctx)
{
    if (!op) {
        if (cb) cb(ctx, -ENOMEM, NULL);
        return;
    }
    op->pool = pool;
    op->cb = cb;
    op->cb_ctx = ctx;
    op->next = NULL;
    if (store->ops_tail)
        store->ops_tail->next = op;
    else
        store->ops_head = op;
    store->ops_tail = op;
    ops_pump(store);
}

int gr_store_topic_ops_pending(const struct gr_store *store)
{
    int n = store->op_running ? 1 : 0;
    for (const struct gr_topic_op *op = store->ops_head; op; op = op->next)
        n++;
    return n;
}

void gr_store_retention_run(struct gr_store *store, int64_t now_ms)
{
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        for (int32_t p = 0; p < t->partition_count; p++)
            if (t->logs[p]) gr_log_retention(t->logs[p], now_ms);
    }
    if (store->ls_checkpoint_dirty) gr_store_checkpoint(store);
}

int gr_store_meta_write(struct gr_store *store, const char *name, const void *data, size_t len)
{
    return gr_file_write_atomic(store->root_fd, name, data, len);
}

int gr_store_meta_read(struct gr_store *store, const char *name, void *buf, size_t len)
{
    char *data;
    size_t n;
    int err = gr_file_read_all(store->root_fd, name, len, &data, &n);
    if (err == -EFBIG) return -EINVAL;
    if (err < 0) return err;
    if (n != len)
        err = -EINVAL;
    else
        memcpy(buf, data, len);
    free(data);
    return err;
}
