/* test_features_etcd.c: UpdateFeatures' write of etcd's features key (cluster/features.h
 * gr_features_etcd_write) against a real etcd: the first write of an absent key, a second one comparing the
 * revision the first returned, a stale revision refused (-EAGAIN, the key untouched), level 0 as an empty
 * feature map, the epoch always the key's mod_revision and rising. Run by cluster/tests/etcd-tests.sh. */
#include <errno.h>
#include <string.h>

#include "cluster/features.h"
#include "cluster/tests/testkit.h"
#include "cluster/values.h"

static struct ev_loop *loop;
static struct gr_etcd *etcd;
static struct gr_cluster_layout lay;

struct outcome {
    bool done;
    int err;
    int64_t epoch;
};

static void on_written(void *ctx, int err, int64_t epoch)
{
    struct outcome *o = ctx;
    o->done = true;
    o->err = err;
    o->epoch = epoch;
}

static bool is_done(void *arg)
{
    return ((struct outcome *)arg)->done;
}

/* Writes `level` comparing `expect`; returns the outcome (err -ETIMEDOUT when no answer came). */
static struct outcome write_level(int16_t level, int64_t expect)
{
    struct outcome o = {0};
    int rc = gr_features_etcd_write(etcd, &lay, level, expect, on_written, &o);
    CHECK(rc == 0);
    CHECK(!o.done); /* never inside the call */
    if (rc < 0 || !testkit_run_until(loop, is_done, &o, 5000)) o.err = rc < 0 ? rc : -ETIMEDOUT;
    return o;
}

struct got {
    bool done;
    bool present;
    int64_t mod_revision;
    struct gr_cluster_features v;
};

static void on_range(void *ctx, const struct gr_etcd_result *res)
{
    struct got *g = ctx;
    g->done = true;
    if (res->status != GR_ETCD_OK || res->op.kv_count < 1) return;
    char err[GR_CLUSTER_ERR_BYTES];
    g->present = gr_cluster_features_decode(res->op.kvs[0].value, res->op.kvs[0].value_len, &g->v, err) == 0;
    g->mod_revision = res->op.kvs[0].mod_revision;
}

static struct got read_key(void)
{
    char key[GR_CLUSTER_KEY_BUF];
    struct got g = {0};
    CHECK(gr_cluster_key_features(&lay, key) > 0);
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = key};
    CHECK(gr_etcd_range(etcd, &get, on_range, &g) != NULL);
    CHECK(testkit_run_until(loop, is_done, &g, 5000));
    return g;
}

int main(void)
{
    loop = ev_default_loop(0);
    if (!(etcd = testkit_etcd(loop, 3000)) || testkit_layout(&lay, "features", 7) < 0) {
        printf("features key: 0 passed, 1 failed\n");
        return 1;
    }
    /* the key absent (a cluster made before it existed): expect < 1 */
    struct outcome a = write_level(1, -1);
    CHECK(a.err == 0 && a.epoch > 0);
    struct got g = read_key();
    CHECK(g.present && g.mod_revision == a.epoch);
    CHECK(g.v.count == 1 && !strcmp(g.v.features[0].name, "transaction.version") &&
          g.v.features[0].level == 1);
    /* absent expected, but it is there now: refused */
    struct outcome b = write_level(0, -1);
    CHECK(b.err == -EAGAIN);
    /* level 0 comparing the revision the first write gave: an empty map, a higher epoch */
    struct outcome c = write_level(0, a.epoch);
    CHECK(c.err == 0 && c.epoch > a.epoch);
    g = read_key();
    CHECK(g.present && g.mod_revision == c.epoch && g.v.count == 0);
    /* a stale revision (another broker's change came first): refused, the key untouched */
    struct outcome d = write_level(1, a.epoch);
    CHECK(d.err == -EAGAIN);
    g = read_key();
    CHECK(g.mod_revision == c.epoch && g.v.count == 0);
    /* back to 1 at the current revision */
    struct outcome e = write_level(1, c.epoch);
    CHECK(e.err == 0 && e.epoch > c.epoch);
    g = read_key();
    CHECK(g.mod_revision == e.epoch && g.v.count == 1 && g.v.features[0].level == 1);
    gr_etcd_free(etcd);
    printf("features key: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
