/*
 * layout.c: the etcd key layout (layout.h): checks of the key parts, the builders, the parser. Every
 * builder validates its inputs first, so the snprintf below can never truncate (the compile-time check
 * bounds the longest key); the parser accepts exactly what the builders produce, byte for byte.
 */
#include "cluster/layout.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "storage/store.h" /* gr_uuid_to_base64url, gr_uuid_from_base64url */

/* root + "partitions/" + topic id + "/" + partition, and root + "topics/" + name: the longest keys. */
_Static_assert(GR_CLUSTER_PREFIX_BYTES_MAX + 1 + GR_UUID_TEXT_BYTES + 1 + sizeof "partitions/" +
                       GR_UUID_TEXT_BYTES + 1 + 10 <=
                   GR_CLUSTER_KEY_BYTES_MAX,
               "partition keys exceed GR_CLUSTER_KEY_BYTES_MAX");
_Static_assert(GR_CLUSTER_PREFIX_BYTES_MAX + 1 + GR_UUID_TEXT_BYTES + 1 + sizeof "topics/" +
                       GR_TOPIC_NAME_BYTES_MAX <=
                   GR_CLUSTER_KEY_BYTES_MAX,
               "topic keys exceed GR_CLUSTER_KEY_BYTES_MAX");

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

int gr_cluster_prefix_check(const char *prefix, char *err, size_t err_cap)
{
    size_t len = strlen(prefix);
    const char *why = NULL;
    if (len == 0 || prefix[0] != '/')
        why = "must start with '/'";
    else if (len > GR_CLUSTER_PREFIX_BYTES_MAX)
        why = "is longer than 128 bytes";
    else if (prefix[len - 1] == '/')
        why = "must not end with '/'";
    for (size_t i = 0; !why && i < len; i++)
        if (prefix[i] != '/' && !name_char(prefix[i])) why = "may hold only [a-zA-Z0-9._-] and '/'";
    for (size_t i = 0; !why && i < len; i++) { /* each segment starts after a '/' */
        if (prefix[i] != '/') continue;
        size_t n = strcspn(prefix + i + 1, "/");
        if (n == 0 || (n == 1 && prefix[i + 1] == '.') || (n == 2 && !strncmp(prefix + i + 1, "..", 2)))
            why = "must not hold an empty, '.' or '..' segment";
    }
    if (!why) return 0;
    snprintf(err, err_cap, "gregor.metadata.etcd.prefix %s, got '%.*s'", why, (int)(len > 200 ? 200 : len),
             prefix);
    return -EINVAL;
}

int gr_cluster_topic_name_check(const char *name, size_t len)
{
    if (len == 0 || len > GR_TOPIC_NAME_BYTES_MAX) return -EINVAL;
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) return -EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!name_char(name[i])) return -EINVAL;
    return 0;
}

void gr_cluster_uuid_format(struct gr_uuid id, char *out)
{
    gr_uuid_to_base64url(id.b, out);
}

int gr_cluster_uuid_parse(const char *text, size_t len, struct gr_uuid *out)
{
    return gr_uuid_from_base64url(text, len, out->b) == 0 ? 0 : -EINVAL;
}

int gr_cluster_id_check(const char *id, size_t len)
{
    struct gr_uuid u;
    return gr_cluster_uuid_parse(id, len, &u);
}

int gr_cluster_key_cluster_id(const char *prefix, char *out)
{
    char err[256];
    if (gr_cluster_prefix_check(prefix, err, sizeof err)) return -EINVAL;
    return snprintf(out, GR_CLUSTER_KEY_BUF, "%s/cluster_id", prefix);
}

int gr_cluster_layout_init(struct gr_cluster_layout *lay, const char *prefix, const char *cluster_id)
{
    char err[256];
    if (gr_cluster_prefix_check(prefix, err, sizeof err) ||
        gr_cluster_id_check(cluster_id, strlen(cluster_id)))
        return -EINVAL;
    lay->prefix_len = (size_t)snprintf(lay->prefix, sizeof lay->prefix, "%s", prefix);
    lay->root_len = (size_t)snprintf(lay->root, sizeof lay->root, "%s/%s/", prefix, cluster_id);
    return 0;
}

/* root + `rest`: every fixed key. */
static int fixed_key(const struct gr_cluster_layout *lay, const char *rest, char *out)
{
    return snprintf(out, GR_CLUSTER_KEY_BUF, "%s%s", lay->root, rest);
}

int gr_cluster_key_features(const struct gr_cluster_layout *lay, char *out)
{
    return fixed_key(lay, "features", out);
}

int gr_cluster_key_controller(const struct gr_cluster_layout *lay, char *out)
{
    return fixed_key(lay, "controller", out);
}

int gr_cluster_key_producer_ids(const struct gr_cluster_layout *lay, char *out)
{
    return fixed_key(lay, "producer_ids", out);
}

int gr_cluster_prefix_root(const struct gr_cluster_layout *lay, char *out)
{
    return fixed_key(lay, "", out);
}

int gr_cluster_prefix_brokers(const struct gr_cluster_layout *lay, char *out)
{
    return fixed_key(lay, "brokers/", out);
}

int gr_cluster_prefix_topics(const struct gr_cluster_layout *lay, char *out)
{
    return fixed_key(lay, "topics/", out);
}

int gr_cluster_key_broker(const struct gr_cluster_layout *lay, int32_t node_id, char *out)
{
    if (node_id < 0) return -EINVAL;
    return snprintf(out, GR_CLUSTER_KEY_BUF, "%sbrokers/%d", lay->root, (int)node_id);
}

int gr_cluster_key_topic(const struct gr_cluster_layout *lay, const char *topic, size_t topic_len, char *out)
{
    if (gr_cluster_topic_name_check(topic, topic_len)) return -EINVAL;
    return snprintf(out, GR_CLUSTER_KEY_BUF, "%stopics/%.*s", lay->root, (int)topic_len, topic);
}

int gr_cluster_prefix_partitions(const struct gr_cluster_layout *lay, struct gr_uuid topic_id, char *out)
{
    char id[GR_UUID_TEXT_BYTES + 1];
    gr_cluster_uuid_format(topic_id, id);
    return snprintf(out, GR_CLUSTER_KEY_BUF, "%spartitions/%s/", lay->root, id);
}

int gr_cluster_key_partition(const struct gr_cluster_layout *lay, struct gr_uuid topic_id, int32_t partition,
                             char *out)
{
    if (partition < 0 || partition >= GR_PARTITIONS_PER_TOPIC_MAX) return -EINVAL;
    char id[GR_UUID_TEXT_BYTES + 1];
    gr_cluster_uuid_format(topic_id, id);
    return snprintf(out, GR_CLUSTER_KEY_BUF, "%spartitions/%s/%d", lay->root, id, (int)partition);
}

int gr_cluster_range_end(const char *prefix, size_t len, char *out)
{
    if (len == 0 || (unsigned char)prefix[len - 1] == 0xff) return -EINVAL;
    memcpy(out, prefix, len);
    out[len - 1] = (char)((unsigned char)prefix[len - 1] + 1);
    out[len] = '\0';
    return (int)len;
}

static bool scram_plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

int gr_cluster_scram_escape(const char *name, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (len == 0) return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        size_t need = scram_plain(c) ? 1 : 3;
        if (o + need + 1 > cap || o + need > INT32_MAX) return -EINVAL;
        if (need == 1) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return (int)o;
}

static int upper_hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int gr_cluster_scram_unescape(const char *seg, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    if (len == 0 || len > INT32_MAX) return -EINVAL;
    for (size_t i = 0; i < len; o++) {
        if (o >= cap) return -EINVAL;
        unsigned char c = (unsigned char)seg[i];
        if (c != '%') {
            if (!scram_plain(c)) return -EINVAL;
            out[o] = (char)c;
            i++;
            continue;
        }
        int hi = i + 2 < len ? upper_hex(seg[i + 1]) : -1, lo = hi >= 0 ? upper_hex(seg[i + 2]) : -1;
        if (lo < 0 || scram_plain((unsigned char)(hi << 4 | lo))) return -EINVAL;
        out[o] = (char)(hi << 4 | lo);
        i += 3;
    }
    return (int)o;
}

/* A canonical decimal in [0, max]: digits only, no leading zero unless it is "0". 0 or -EINVAL. */
static int parse_index(const char *s, size_t len, int64_t max, int32_t *out)
{
    if (len == 0 || len > 10 || (len > 1 && s[0] == '0')) return -EINVAL;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return -EINVAL;
    *out = (int32_t)v;
    return 0;
}

/* Whether `rest` (`len` bytes) is `word`, exactly. */
static bool is(const char *rest, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(rest, word, len) == 0;
}

/* Whether `rest` starts with `word` ("brokers/"); advances past it. */
static bool eat(const char **rest, size_t *len, const char *word)
{
    size_t n = strlen(word);
    if (*len < n || memcmp(*rest, word, n) != 0) return false;
    *rest += n;
    *len -= n;
    return true;
}

/* partitions/<topic id>/<partition>, past "partitions/". */
static int parse_partition(const char *rest, size_t len, struct gr_cluster_key *out)
{
    if (len < GR_UUID_TEXT_BYTES + 2 || rest[GR_UUID_TEXT_BYTES] != '/') return -EINVAL;
    if (gr_cluster_uuid_parse(rest, GR_UUID_TEXT_BYTES, &out->topic_id)) return -EINVAL;
    out->kind = GR_CLUSTER_KEY_PARTITION;
    return parse_index(rest + GR_UUID_TEXT_BYTES + 1, len - GR_UUID_TEXT_BYTES - 1,
                       GR_PARTITIONS_PER_TOPIC_MAX - 1, &out->partition);
}

int gr_cluster_key_parse(const struct gr_cluster_layout *lay, const char *key, size_t len,
                         struct gr_cluster_key *out)
{
    memset(out, 0, sizeof *out);
    if (len <= lay->root_len || len > GR_CLUSTER_KEY_BYTES_MAX || memcmp(key, lay->root, lay->root_len) != 0)
        return -EINVAL;
    const char *rest = key + lay->root_len;
    size_t n = len - lay->root_len;
    if (is(rest, n, "features")) {
        out->kind = GR_CLUSTER_KEY_FEATURES;
        return 0;
    }
    if (is(rest, n, "controller")) {
        out->kind = GR_CLUSTER_KEY_CONTROLLER;
        return 0;
    }
    if (is(rest, n, "producer_ids")) {
        out->kind = GR_CLUSTER_KEY_PRODUCER_IDS;
        return 0;
    }
    if (eat(&rest, &n, "brokers/")) {
        out->kind = GR_CLUSTER_KEY_BROKER;
        return parse_index(rest, n, INT32_MAX, &out->node_id);
    }
    if (eat(&rest, &n, "topics/")) {
        if (gr_cluster_topic_name_check(rest, n)) return -EINVAL;
        out->kind = GR_CLUSTER_KEY_TOPIC;
        memcpy(out->topic, rest, n);
        out->topic[n] = '\0';
        out->topic_len = n;
        return 0;
    }
    if (eat(&rest, &n, "partitions/")) return parse_partition(rest, n, out);
    /* a later version's kind: one segment or more of the characters a key of this layout uses */
    for (size_t i = 0; i < n; i++)
        if (rest[i] != '/' && !name_char(rest[i])) return -EINVAL;
    return is(rest, n, "brokers") || is(rest, n, "topics") || is(rest, n, "partitions") ? -EINVAL : -ENOENT;
}
