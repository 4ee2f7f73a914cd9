/*
 * features.c: the finalized features' rules (cluster/features.h): UpdateFeatures' checks with Kafka 4.4's
 * messages, one node's features file and its start-up rule, and the features key's txn in a cluster.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/features.h"
#include "cluster/values.h"
#include "common/log.h"
#include "protocol/errors.h"

/* VersionRange.toString: "min" when equal, "min+" up to INT16_MAX, else "min-max". */
static void range_text(int lo, int hi, char *out, size_t cap)
{
    if (lo == hi)
        snprintf(out, cap, "%d", lo);
    else if (hi == INT16_MAX)
        snprintf(out, cap, "%d+", lo);
    else
        snprintf(out, cap, "%d-%d", lo, hi);
}

static int16_t refuse(const char *name, size_t len, int level, const char *reason, char *msg, size_t cap)
{
    snprintf(msg, cap, "Invalid update version %d for feature %.*s. %s", level, (int)len, name, reason);
    return GR_ERR_INVALID_UPDATE_VERSION;
}

int16_t gr_features_check(const char *name, size_t len, int level, int upgrade, int16_t current,
                          int32_t controller_id, char *msg, size_t cap)
{
    if (cap) msg[0] = 0;
    if (len > GR_CLUSTER_FEATURE_NAME_BYTES_MAX) len = GR_CLUSTER_FEATURE_NAME_BYTES_MAX; /* in the text */
    if (upgrade < GR_FEATURE_UPGRADE || upgrade > GR_FEATURE_UNSAFE_DOWNGRADE)
        return refuse(name, len, level, "The controller does not support the given upgrade type.", msg, cap);
    if (level < 0) return refuse(name, len, level, "A feature version cannot be less than 0.", msg, cap);
    bool known = len == strlen("transaction.version") && !memcmp(name, "transaction.version", len);
    int hi = known ? GR_TRANSACTION_VERSION_MAX : 0; /* QuorumFeatures.DISABLED: 0-0 */
    if (level > hi) {
        char reason[128], range[32];
        range_text(0, hi, range, sizeof range);
        if (hi == 0)
            snprintf(reason, sizeof reason, "Local controller %d does not support this feature.",
                     controller_id);
        else
            snprintf(reason, sizeof reason, "Local controller %d only supports versions %s", controller_id,
                     range);
        return refuse(name, len, level, reason, msg, cap);
    }
    if (level < current && upgrade == GR_FEATURE_UPGRADE)
        return refuse(
            name, len, level,
            "Can't downgrade the version of this feature without setting the upgrade type to either "
            "safe or unsafe downgrade.",
            msg, cap);
    if (level > current && upgrade != GR_FEATURE_UPGRADE)
        return refuse(name, len, level, "Can't downgrade to a newer version.", msg, cap);
    if (!known) { /* Feature.featureFromName: only level 0 of an unknown name gets this far */
        char reason[GR_CLUSTER_FEATURE_NAME_BYTES_MAX + 32];
        snprintf(reason, sizeof reason, "Feature %.*s not found.", (int)len, name);
        return refuse(name, len, level, reason, msg, cap);
    }
    return GR_ERR_NONE;
}

/* One "key=value\n" line at *p: the value as a number in [lo, hi]. */
static int line(const char **p, const char *end, const char *key, long long lo, long long hi, long long *out)
{
    size_t kl = strlen(key);
    if ((size_t)(end - *p) < kl + 2 || memcmp(*p, key, kl) || (*p)[kl] != '=') return -EINVAL;
    const char *s = *p + kl + 1;
    long long v = 0;
    int digits = 0;
    while (s < end && *s >= '0' && *s <= '9' && digits < 19)
        v = v * 10 + (*s++ - '0'), digits++;
    if (!digits || s >= end || *s != '\n' || v < lo || v > hi) return -EINVAL;
    *p = s + 1;
    *out = v;
    return 0;
}

int gr_features_file_parse(const char *text, size_t len, struct gr_features_file *f)
{
    const char *p = text, *end = text + len;
    long long level, epoch, setting;
    if (line(&p, end, "transaction.version", 0, INT16_MAX, &level) < 0 ||
        line(&p, end, "epoch", 0, INT64_MAX - 1, &epoch) < 0)
        return -EINVAL;
    if (p == end)
        setting = level; /* written before the setting was recorded: the level was the setting */
    else if (line(&p, end, "setting", 0, INT16_MAX, &setting) < 0 || p != end)
        return -EINVAL;
    *f = (struct gr_features_file){(int16_t)level, (int64_t)epoch, (int16_t)setting};
    return 0;
}

int gr_features_file_format(const struct gr_features_file *f, char *out, size_t cap)
{
    int n = snprintf(out, cap, "transaction.version=%d\nepoch=%" PRId64 "\nsetting=%d\n", (int)f->level,
                     f->epoch, (int)f->setting);
    return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

bool gr_features_startup(const struct gr_features_file *old, int16_t setting, bool given,
                         struct gr_features_file *out)
{
    if (!old) {
        *out = (struct gr_features_file){setting, 0, setting};
        return true;
    }
    *out = *old;
    /* the stored level stands: the same setting as at the last start, or only the default (an upgrade to a
       build whose default differs must not raise it: kafka-features.sh upgrade does) */
    if (!given || old->setting == setting) return false;
    out->setting = setting; /* an operator changed the setting: it wins */
    if (old->level != setting) out->level = setting, out->epoch = old->epoch + 1;
    return true;
}

struct etcd_write {
    void (*done)(void *ctx, int err, int64_t epoch);
    void *ctx;
};

static void write_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct etcd_write w = *(struct etcd_write *)ctx;
    free(ctx);
    if (res->status != GR_ETCD_OK) {
        GR_WARN("features: the features key was not written: %s", res->message);
        return w.done(w.ctx, -EIO, 0);
    }
    if (!res->succeeded) return w.done(w.ctx, -EAGAIN, 0);
    w.done(w.ctx, 0, res->revision); /* the put's mod_revision: the txn's header revision */
}

int gr_features_etcd_write(struct gr_etcd *etcd, const struct gr_cluster_layout *lay, int16_t level,
                           int64_t expect_epoch, void (*done)(void *ctx, int err, int64_t epoch), void *ctx)
{
    struct gr_cluster_features fv = {0};
    if (level > 0) {
        fv.count = 1;
        snprintf(fv.features[0].name, sizeof fv.features[0].name, "transaction.version");
        fv.features[0].level = level;
    }
    char key[GR_CLUSTER_KEY_BUF], *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t vlen = 0;
    int rc = gr_cluster_key_features(lay, key);
    if (rc >= 0) rc = gr_cluster_features_encode(&fv, &val, &vlen, err);
    if (rc < 0) return rc == -ENOMEM ? -ENOMEM : -EIO;
    struct etcd_write *w = malloc(sizeof *w);
    if (!w) {
        free(val);
        return -ENOMEM;
    }
    *w = (struct etcd_write){done, ctx};
    struct gr_etcd_compare cmp = {.key = key,
                                  .target = expect_epoch > 0 ? GR_ETCD_MOD : GR_ETCD_CREATE,
                                  .cmp = GR_ETCD_EQUAL,
                                  .number = expect_epoch > 0 ? expect_epoch : 0};
    struct gr_etcd_op put = {.type = GR_ETCD_OP_PUT, .key = key, .value = val, .value_len = vlen};
    struct gr_etcd_txn txn = {&cmp, 1, &put, 1, NULL, 0};
    struct gr_etcd_req *req = gr_etcd_txn(etcd, &txn, write_cb, w);
    free(val);
    if (!req) {
        GR_WARN("features: %s", gr_etcd_last_error(etcd));
        free(w);
        return -EIO;
    }
    return 0;
}
