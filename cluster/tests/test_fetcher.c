/*
 * test_fetcher.c: the replica fetcher (cluster/fetcher.h) against a fake leader in this process (a loopback
 * port 0 listener on the same libev loop that answers ApiVersions from the codec, records every Fetch and
 * ListOffsets it receives, decoded, and answers each when the test says so) with real follower partitions
 * (a store in a temporary directory, topic "orders", 4 partitions, this broker node 2, the leader node 1).
 *
 * Covered: the Fetch's fields (ReplicaState {2, broker epoch 7}, FetchOffset = log end, LastFetchedEpoch,
 * CurrentLeaderEpoch, LogStartOffset, the caps); records appended at the leader's offsets, its log start
 * offset raised to and its high watermark taken; fetch sessions (KIP-227: a full fetch at (0, 0), then
 * incremental ones naming only the partitions that changed, an answer omitting a partition, a session error
 * back to a full fetch at once, a removed partition forgotten; a leader making no session: full every time);
 * a DivergingEpoch truncating to Kafka's offset, the next
 * fetch starting there; the two OFFSET_OUT_OF_RANGE cases through ListOffsets (leader behind: truncated to
 * its end; follower behind the leader's start: truncated fully and restarted there); FENCED_LEADER_EPOCH
 * stopping the partition until it is re-added at a newer epoch; remove() while a fetch is in flight; two
 * partitions in one request; an undecodable and an oversized answer closing the connection with nothing
 * appended; the fsync gate (the storage shim holds the follower's fsync: no fetch until it is done); a
 * truncation's pending file work (the shim holds ftruncate: no fetch until it is done); a re-add at a newer
 * epoch while a fetch is in flight (its records dropped); records not continuing the log marking the
 * partition failed until re-added; a DivergingEpoch truncation whose pages are all cold (its reads on the
 * store's I/O pool, nothing on the loop thread waiting for the disk, no Fetch before it is done), and one
 * done while the connection's long poll for another partition is in flight; an add and a removal in one
 * pass (the removal keeps the add's pump);
 * fetcher ids with num.replica.fetchers 2 (Kafka's values, computed with Java's String.hashCode); bad
 * configurations and arguments. Stalls (the RF 3 fault runs): the gated flush completing between the pump
 * and the timer's arming, and a backoff's end falling between them (a test clock one ms later at every
 * look); the leader's and this broker's registrations changing while a Fetch is in flight; both partitions
 * of a lost connection removed and added again while it is down. Flush notifications (gr_fetcher_flushed,
 * given by a copy of the server's flush binding, the backstop look an hour away where it matters): the gated
 * Fetch sent when told and not before (nor when the flush is done but nobody told), the end of a truncation's
 * file work, notifications for partitions not fetched. Re-entrancy (under ASan): a done hook removing the
 * partition being answered, and one emptying the connection being pumped, told of and adding partitions.
 */
#include <arpa/inet.h>
#include <stdatomic.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/broker_client.h"
#include "cluster/fetcher.h"
#include "cluster/image.h"
#include "common/arena.h"
#include "common/time.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"
#include "storage/iopool.h"
#include "storage/sys.h"
#include "storage/tests/helpers.h"

#define REQS_MAX 64
#define PARTS_MAX 8
#define CLIENTS_MAX 4

/* ---- the fake leader ---- */

struct seen_part {
    uint8_t topic_id[16];
    char topic[32];
    int32_t partition, current_leader_epoch, last_fetched_epoch, partition_max_bytes;
    int64_t fetch_offset, log_start_offset, timestamp;
};

struct seen {
    int16_t key, version;
    int32_t corr;
    int client; /* index of the connection it came on */
    char client_id[64];
    int32_t replica_id, rs_id, max_wait_ms, min_bytes, max_bytes, session_id, session_epoch;
    int64_t rs_epoch;
    int nforgotten; /* forgotten_topics_data's partitions (KIP-227) */
    int32_t forgotten[PARTS_MAX];
    int nparts;
    struct seen_part p[PARTS_MAX];
    int64_t durable_at_receipt; /* the follower's partition 0 durable offset when it arrived */
    int64_t clock_at_receipt;   /* the fetcher's test clock when it arrived (-1: real clock) */
};

struct fake {
    int lfd, cfd[CLIENTS_MAX];
    int port; /* the listener's loopback port (fake_start) */
    ev_io lw, cw[CLIENTS_MAX];
    int accepted, nreqs;
    struct seen reqs[REQS_MAX];
};

static struct ev_loop *loop;
static struct fake fk;
static int32_t fk_session_id;      /* answer_fetch: the SessionId its answers carry (0: no session) */
static int16_t fk_top_error;       /* answer_fetch: the top-level ErrorCode of its next answer (then 0) */
static struct gr_log *watched_log; /* partition 0's log: durable_at_receipt */

/* The fetcher's clock in the race tests (virtual ms, see tclock_now). */
struct tclock {
    int64_t ms;       /* what the last look read */
    int64_t looks;    /* looks so far */
    int64_t flush_at; /* at this look the held fsync is released and awaited (0: never) */
};
static struct tclock *fx_clock;    /* fx_new: the fetcher's clock, NULL: the real one */
static int64_t fx_backoff_ms = 50; /* fx_new: replica.fetch.backoff.ms */
static int64_t fx_disk_poll_ms;    /* fx_new: the fetcher's backstop disk_poll_ms (0: its default) */
static bool fx_no_binding;         /* fx_new: no flush binding (the test calls gr_fetcher_flushed itself) */
static struct gr_iopool *fx_pool;  /* fx_new: an I/O pool for the store (completions run on the loop) */

static const struct gr_msg_ops *ops_of(int16_t key, bool response)
{
    return gr_msg_ops_find(key, response);
}

static bool read_full(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* Sends one answer: size, response header, body of `ops` at `version`. */
static void fake_send(int fd, const struct gr_msg_ops *ops, const void *body, int32_t corr, int16_t version)
{
    int16_t hv = gr_response_header_version(ops, version);
    size_t len = 4 + gr_response_header_size(hv) + ops->size(body, version);
    uint8_t *buf = malloc(len);
    struct gr_wr wr;
    gr_wr_init(&wr, buf, len);
    gr_wr_int32(&wr, (int32_t)(len - 4));
    gr_response_header_encode(&wr, hv, corr);
    ops->encode(&wr, body, version);
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    free(buf);
}

static void fake_api_versions(int fd, int32_t corr, int16_t version)
{
    struct gr_api_versions_response_api_version keys[64];
    int n = 0;
    for (int i = 0; i < gr_msg_ops_count && n < 64; i++) {
        const struct gr_msg_ops *o = &gr_msg_ops_table[i];
        if (o->response) continue;
        gr_api_versions_response_api_version_init(&keys[n]);
        keys[n].api_key = o->api_key;
        keys[n].min_version = o->version_min;
        keys[n++].max_version = o->version_max;
    }
    struct gr_api_versions_response av;
    gr_api_versions_response_init(&av);
    av.api_keys.items = keys;
    av.api_keys.count = n;
    fake_send(fd, ops_of(18, true), &av, corr, version);
}

static void seen_fetch(struct seen *s, const struct gr_fetch_request *r)
{
    s->replica_id = r->replica_id;
    s->rs_id = r->replica_state.replica_id;
    s->rs_epoch = r->replica_state.replica_epoch;
    s->max_wait_ms = r->max_wait_ms;
    s->min_bytes = r->min_bytes;
    s->max_bytes = r->max_bytes;
    s->session_id = r->session_id;
    s->session_epoch = r->session_epoch;
    for (int32_t t = 0; t < r->forgotten_topics_data.count; t++)
        for (int32_t i = 0;
             i < r->forgotten_topics_data.items[t].partitions.count && s->nforgotten < PARTS_MAX; i++)
            s->forgotten[s->nforgotten++] = r->forgotten_topics_data.items[t].partitions.items[i];
    for (int32_t t = 0; t < r->topics.count; t++)
        for (int32_t i = 0; i < r->topics.items[t].partitions.count && s->nparts < PARTS_MAX; i++) {
            const struct gr_fetch_request_fetch_partition *p = &r->topics.items[t].partitions.items[i];
            struct seen_part *sp = &s->p[s->nparts++];
            memcpy(sp->topic_id, r->topics.items[t].topic_id.b, 16);
            snprintf(sp->topic, sizeof sp->topic, "%.*s", (int)r->topics.items[t].topic.len,
                     r->topics.items[t].topic.ptr ? r->topics.items[t].topic.ptr : "");
            sp->partition = p->partition;
            sp->current_leader_epoch = p->current_leader_epoch;
            sp->last_fetched_epoch = p->last_fetched_epoch;
            sp->partition_max_bytes = p->partition_max_bytes;
            sp->fetch_offset = p->fetch_offset;
            sp->log_start_offset = p->log_start_offset;
        }
}

static void seen_list(struct seen *s, const struct gr_list_offsets_request *r)
{
    s->replica_id = r->replica_id;
    for (int32_t t = 0; t < r->topics.count; t++)
        for (int32_t i = 0; i < r->topics.items[t].partitions.count && s->nparts < PARTS_MAX; i++) {
            const struct gr_list_offsets_request_list_offsets_partition *p =
                &r->topics.items[t].partitions.items[i];
            struct seen_part *sp = &s->p[s->nparts++];
            snprintf(sp->topic, sizeof sp->topic, "%.*s", (int)r->topics.items[t].name.len,
                     r->topics.items[t].name.ptr);
            sp->partition = p->partition_index;
            sp->current_leader_epoch = p->current_leader_epoch;
            sp->timestamp = p->timestamp;
        }
}

/* Decodes one request frame into the next `seen` slot (Fetch and ListOffsets only). */
static void fake_record(int client, const uint8_t *frame, size_t n, int16_t key, int16_t version,
                        int32_t corr)
{
    assert_true(fk.nreqs < REQS_MAX);
    struct seen *s = &fk.reqs[fk.nreqs++];
    memset(s, 0, sizeof *s);
    s->key = key, s->version = version, s->corr = corr, s->client = client;
    s->durable_at_receipt = watched_log ? gr_log_durable_offset(watched_log) : -1;
    s->clock_at_receipt = fx_clock ? fx_clock->ms : -1;
    const struct gr_msg_ops *ops = ops_of(key, false);
    struct gr_arena arena;
    gr_arena_init(&arena, 1 << 20);
    struct gr_rd rd;
    gr_rd_init(&rd, frame, n, &arena);
    struct gr_request_header h;
    assert_int_equal(gr_request_header_decode(&rd, gr_request_header_version(version, ops->flexible_min), &h),
                     0);
    snprintf(s->client_id, sizeof s->client_id, "%.*s", (int)h.client_id.len, h.client_id.ptr);
    if (key == 1) {
        struct gr_fetch_request r;
        gr_fetch_request_init(&r);
        assert_int_equal(gr_fetch_request_decode(&rd, version, &r), 0);
        seen_fetch(s, &r);
    } else {
        struct gr_list_offsets_request r;
        gr_list_offsets_request_init(&r);
        assert_int_equal(gr_list_offsets_request_decode(&rd, version, &r), 0);
        seen_list(s, &r);
    }
    gr_arena_reset(&arena);
}

static void fake_close(int i)
{
    ev_io_stop(loop, &fk.cw[i]);
    close(fk.cfd[i]);
    fk.cfd[i] = -1;
}

static void fake_on_client(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    int i = (int)(w - fk.cw);
    uint8_t hdr[4];
    if (!read_full(fk.cfd[i], hdr, 4)) {
        fake_close(i);
        return;
    }
    size_t n = gr_be32(hdr);
    uint8_t *frame = n <= (1 << 20) ? malloc(n) : NULL;
    int16_t key, version;
    int32_t corr;
    if (!frame || !read_full(fk.cfd[i], frame, n) ||
        gr_request_header_peek(frame, n, &key, &version, &corr)) {
        free(frame);
        fake_close(i);
        return;
    }
    if (key == 18)
        fake_api_versions(fk.cfd[i], corr, version);
    else
        fake_record(i, frame, n, key, version, corr);
    free(frame);
}

static void fake_on_accept(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)w;
    (void)revents;
    int fd = accept(fk.lfd, NULL, NULL);
    if (fd < 0) return;
    int i = 0;
    while (i < CLIENTS_MAX && fk.cfd[i] >= 0)
        i++;
    if (i == CLIENTS_MAX) {
        close(fd);
        return;
    }
    fk.cfd[i] = fd;
    fk.accepted++;
    ev_io_init(&fk.cw[i], fake_on_client, fd, EV_READ);
    ev_io_start(loop, &fk.cw[i]);
}

static int fake_start(void)
{
    memset(&fk, 0, sizeof fk);
    for (int i = 0; i < CLIENTS_MAX; i++)
        fk.cfd[i] = -1;
    fk.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_true(fk.lfd >= 0);
    assert_int_equal(bind(fk.lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fk.lfd, 8), 0);
    assert_int_equal(getsockname(fk.lfd, (struct sockaddr *)&a, &al), 0);
    ev_io_init(&fk.lw, fake_on_accept, fk.lfd, EV_READ);
    ev_io_start(loop, &fk.lw);
    fk.port = ntohs(a.sin_port);
    return fk.port;
}

static void fake_stop(void)
{
    for (int i = 0; i < CLIENTS_MAX; i++)
        if (fk.cfd[i] >= 0) fake_close(i);
    ev_io_stop(loop, &fk.lw);
    close(fk.lfd);
}

/* One partition's answer in a Fetch response. */
struct pans {
    int16_t error;
    int64_t hw, log_start;
    int32_t div_epoch;
    int64_t div_end;
    const uint8_t *records;
    size_t len;
};

/* Answers Fetch number `idx` with `ans[i]` for its partition i (one topic entry each). */
static void answer_fetch(int idx, const struct pans *ans)
{
    struct seen *s = &fk.reqs[idx];
    struct gr_fetch_response_fetchable_topic_response topics[PARTS_MAX];
    struct gr_fetch_response_partition_data parts[PARTS_MAX];
    for (int i = 0; i < s->nparts; i++) {
        gr_fetch_response_fetchable_topic_response_init(&topics[i]);
        memcpy(topics[i].topic_id.b, s->p[i].topic_id, 16);
        topics[i].topic = gr_str_c(s->p[i].topic);
        topics[i].partitions.items = &parts[i];
        topics[i].partitions.count = 1;
        gr_fetch_response_partition_data_init(&parts[i]);
        parts[i].partition_index = s->p[i].partition;
        parts[i].error_code = ans[i].error;
        parts[i].high_watermark = ans[i].hw;
        parts[i].log_start_offset = ans[i].log_start;
        parts[i].diverging_epoch.epoch = ans[i].div_epoch;
        parts[i].diverging_epoch.end_offset = ans[i].div_end;
        parts[i].records =
            gr_records_mem((struct gr_bytes){ans[i].records, ans[i].records ? (int32_t)ans[i].len : -1});
    }
    struct gr_fetch_response r;
    gr_fetch_response_init(&r);
    r.responses.items = topics;
    r.responses.count = s->nparts;
    r.session_id = fk_session_id;
    r.error_code = fk_top_error;
    if (fk_top_error) r.responses.count = 0, r.session_id = 0;
    fk_top_error = 0;
    fake_send(fk.cfd[s->client], ops_of(1, true), &r, s->corr, s->version);
}

/* Answers ListOffsets number `idx` (one partition) with `offset`. */
static void answer_list(int idx, int16_t error, int64_t offset)
{
    struct seen *s = &fk.reqs[idx];
    struct gr_list_offsets_response_list_offsets_partition_response p;
    gr_list_offsets_response_list_offsets_partition_response_init(&p);
    p.partition_index = s->p[0].partition;
    p.error_code = error;
    p.offset = offset;
    p.timestamp = -1;
    struct gr_list_offsets_response_list_offsets_topic_response t;
    gr_list_offsets_response_list_offsets_topic_response_init(&t);
    t.name = gr_str_c(s->p[0].topic);
    t.partitions.items = &p;
    t.partitions.count = 1;
    struct gr_list_offsets_response r;
    gr_list_offsets_response_init(&r);
    r.topics.items = &t;
    r.topics.count = 1;
    fake_send(fk.cfd[s->client], ops_of(2, true), &r, s->corr, s->version);
}

/* ---- the flush binding (server/broker.c's, as the broker has it) ----
 * The store's on_flushed (a flusher or I/O thread) queues the log and wakes the loop; on the loop each log's
 * partition is told (gr_partition_flushed) and then the fetcher (gr_fetcher_flushed). */

#define FLUSHED_MAX 256
static pthread_mutex_t fl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gr_log *fl_logs[FLUSHED_MAX];
static int fl_count;
static ev_async fl_async;
static struct fx *fl_fx; /* the fixture being told, NULL: none */
static int fl_told;      /* gr_fetcher_flushed calls the binding made */

static void fl_on_flushed(void *ctx, struct gr_log *log, int64_t durable, int err)
{
    (void)ctx, (void)durable, (void)err;
    pthread_mutex_lock(&fl_mu);
    if (fl_count < FLUSHED_MAX) fl_logs[fl_count++] = log;
    pthread_mutex_unlock(&fl_mu);
    ev_async_send(loop, &fl_async);
}

static void fl_on_async(struct ev_loop *l, ev_async *w, int revents);

/* ---- the follower ---- */

static const uint8_t TOPIC_ID[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6, 7};

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_topic *topic;
    struct gr_partitions *ps;
    struct gr_partition *part[4];
    struct gr_image *img;
    struct gr_broker_client *bc;
    struct gr_fetcher *f;
};

/* Makes partition i a follower of broker 1 at `epoch`. */
static void follow(struct fx *x, int i, int32_t epoch)
{
    static const int32_t replicas[] = {1, 2};
    struct gr_partition_role_change c = {
        GR_PARTITION_FOLLOWER, 1, epoch, epoch, replicas, 2, replicas, 2, 1, 0};
    assert_int_equal(gr_partition_set_role(x->part[i], &c), 0);
}

static void image_broker(struct gr_image *img, int32_t id, int port, int64_t epoch)
{
    struct gr_image_broker br = {.node_id = id, .epoch = epoch, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "PLAINTEXT");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = port;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
}

static int64_t tclock_now(void *ctx);

static struct fx *fx_new(bool gate, int32_t num_fetchers)
{
    struct fx *x = calloc(1, sizeof *x);
    th_tmpdir(x->dir, sizeof x->dir);
    struct gr_store_config sc;
    th_config(&sc, x->dir);
    if (!fx_no_binding) sc.on_flushed = fl_on_flushed;
    assert_int_equal(gr_store_open(&sc, &x->store), 0);
    if (fx_pool) gr_store_set_iopool(x->store, fx_pool);
    assert_int_equal(gr_store_topic_create(x->store, "orders", 4, NULL, NULL, 0, &x->topic), 0);
    struct gr_partitions_config pc = {x->store, gate};
    assert_non_null(x->ps = gr_partitions_create(&pc));
    for (int i = 0; i < 4; i++) {
        assert_non_null(x->part[i] = gr_partition_get(x->ps, gr_topic_log(x->topic, i)));
        follow(x, i, 5);
    }
    watched_log = gr_topic_log(x->topic, 0);
    int port = fake_start();
    assert_non_null(x->img = gr_image_new(2));
    image_broker(x->img, 1, port, 3);
    image_broker(x->img, 2, 1, 7); /* this broker: its broker epoch goes in ReplicaState */
    gr_image_changed(x->img);
    char err[128];
    struct gr_broker_client_config bcc = {.node_id = 2,
                                          .listener_name = "PLAINTEXT",
                                          .request_timeout_ms = 5000,
                                          .backoff_ms = 50,
                                          .response_bytes_max = 1 << 20};
    assert_non_null(x->bc = gr_broker_client_new(loop, x->img, &bcc, err, sizeof err));
    struct gr_fetcher_config fc = {.node_id = 2,
                                   .num_fetchers = num_fetchers,
                                   .max_wait_ms = 500,
                                   .min_bytes = 1,
                                   .partition_max_bytes = 1048576,
                                   .response_max_bytes = 10485760,
                                   .backoff_ms = fx_backoff_ms,
                                   .fsync_gate = gate,
                                   .now_ms = fx_clock ? tclock_now : NULL,
                                   .clock_ctx = fx_clock,
                                   .disk_poll_ms = fx_disk_poll_ms};
    assert_non_null(x->f = gr_fetcher_new(loop, x->bc, x->img, &fc, err, sizeof err));
    fl_fx = x;
    return x;
}

static void fl_on_async(struct ev_loop *l, ev_async *w, int revents)
{
    (void)l, (void)w, (void)revents;
    struct gr_log *logs[FLUSHED_MAX];
    pthread_mutex_lock(&fl_mu);
    int n = fl_count;
    memcpy(logs, fl_logs, sizeof *logs * (size_t)n);
    fl_count = 0;
    pthread_mutex_unlock(&fl_mu);
    for (int i = 0; i < n && fl_fx; i++) {
        struct gr_partition *part = gr_partition_get(fl_fx->ps, logs[i]);
        gr_partition_flushed(part);
        gr_fetcher_flushed(fl_fx->f, part);
        fl_told++;
    }
}

static void fx_free(struct fx *x)
{
    fl_fx = NULL;
    gr_fetcher_free(x->f);
    gr_broker_client_free(x->bc);
    gr_image_free(x->img);
    fake_stop();
    watched_log = NULL;
    gr_partitions_destroy(x->ps);
    if (fx_pool) {
        gr_store_set_iopool(x->store, NULL);
        gr_iopool_drain(fx_pool);
    }
    gr_store_close(x->store);
    pthread_mutex_lock(&fl_mu); /* reports of this store not yet handed over */
    fl_count = 0;
    pthread_mutex_unlock(&fl_mu);
    th_rmtree(x->dir);
    free(x);
}

static void add(struct fx *x, int i, int32_t epoch)
{
    assert_int_equal(gr_fetcher_add(x->f, x->part[i], "orders", TOPIC_ID, i, 1, epoch), 0);
}

static struct gr_log *log_of(struct fx *x, int i)
{
    return gr_partition_log(x->part[i]);
}

static void wake(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l, (void)t, (void)revents;
}

/* Runs the loop until `n` requests reached the fake or `ms` passed; returns whether they did. */
static bool until_reqs(int n, int64_t ms)
{
    int64_t end = gr_time_mono_ms() + ms;
    ev_timer guard;
    ev_timer_init(&guard, wake, 0.01, 0.01);
    ev_timer_start(loop, &guard);
    while (fk.nreqs < n && gr_time_mono_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &guard);
    return fk.nreqs >= n;
}

/* Appends one batch of `count` records at `base` in leader epoch `epoch` to buf; returns its length. */
static size_t mk_batch(uint8_t *buf, int64_t base, int32_t count, int32_t epoch)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000 + base, (uint32_t)base, &len);
    gr_put_be64(b + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)base);
    gr_put_be32(b + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)epoch);
    memcpy(buf, b, len);
    free(b);
    return len;
}

static size_t fed_bytes; /* the records bytes the last feed() answered with */

static const struct pans EMPTY = {.error = 0, .hw = -1, .log_start = -1, .div_epoch = -1, .div_end = -1};

/* Fills the follower's partition 0 from offset 0 with batches (count, epoch)..., via the fetcher: the fetch
   numbered `idx` is answered; returns the next request's index. */
static int feed(int idx, int64_t hw, int nb, const int32_t *counts, const int32_t *epochs)
{
    uint8_t buf[8192];
    size_t len = 0;
    int64_t base = fk.reqs[idx].p[0].fetch_offset;
    for (int i = 0; i < nb; i++) {
        len += mk_batch(buf + len, base, counts[i], epochs[i]);
        base += counts[i];
    }
    struct pans a = EMPTY;
    a.hw = hw;
    a.log_start = 0;
    a.records = buf;
    a.len = len;
    fed_bytes = len;
    answer_fetch(idx, &a);
    assert_true(until_reqs(idx + 2, 5000));
    return idx + 1;
}

/* ---- cases ---- */

/* The first Fetch's fields; records appended at the leader's offsets; its high watermark taken; the next
   fetch asks from the new log end offset with the last batch's epoch. */
static void test_fetch_appends(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    struct seen *s = &fk.reqs[0];
    assert_int_equal(s->key, 1);
    assert_true(s->version >= 15);
    assert_int_equal(s->rs_id, 2);
    assert_int_equal(s->rs_epoch, 7);
    assert_int_equal(s->max_wait_ms, 500);
    assert_int_equal(s->min_bytes, 1);
    assert_int_equal(s->max_bytes, 10485760);
    assert_int_equal(s->session_id, 0); /* KIP-227: a full fetch asking for a session */
    assert_int_equal(s->session_epoch, 0);
    assert_int_equal(s->nparts, 1);
    assert_memory_equal(s->p[0].topic_id, TOPIC_ID, 16);
    assert_int_equal(s->p[0].partition, 0);
    assert_int_equal(s->p[0].current_leader_epoch, 5);
    assert_int_equal(s->p[0].fetch_offset, 0);
    assert_int_equal(s->p[0].last_fetched_epoch, -1);
    assert_int_equal(s->p[0].log_start_offset, 0);
    assert_int_equal(s->p[0].partition_max_bytes, 1048576);
    assert_string_equal(s->client_id, "broker-2-fetcher-0");
    int32_t counts[] = {3, 2}, epochs[] = {4, 5};
    int n = feed(0, 4, 2, counts, epochs);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 5);
    assert_int_equal(gr_partition_visible_offset(x->part[0]), 4);
    assert_int_equal(gr_log_epoch_for_offset(log_of(x, 0), 2), 4);
    assert_int_equal(gr_log_epoch_for_offset(log_of(x, 0), 3), 5);
    assert_int_equal(fk.reqs[n].p[0].fetch_offset, 5);
    assert_int_equal(fk.reqs[n].p[0].last_fetched_epoch, 5);
    assert_int_equal(fk.reqs[n].session_id, 0); /* the leader made no session: full again, asking again */
    assert_int_equal(fk.reqs[n].session_epoch, 0);
    /* the next answer carries no records, the leader's log start offset 2 and high watermark 9: the log
       start offset is raised, the high watermark moves up to the log end offset, the next fetch says so */
    struct pans a = EMPTY;
    a.hw = 9;
    a.log_start = 2;
    answer_fetch(n, &a);
    assert_true(until_reqs(n + 2, 5000));
    assert_int_equal(gr_partition_visible_offset(x->part[0]), 5);
    assert_int_equal(gr_log_start_offset(log_of(x, 0)), 2);
    assert_int_equal(fk.reqs[n + 1].p[0].log_start_offset, 2);
    assert_int_equal(fk.reqs[n + 1].p[0].fetch_offset, 5);
    assert_int_equal(gr_fetcher_stats(x->f)->batches_bytes, (int64_t)fed_bytes);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 1);
    assert_int_equal(gr_fetcher_stats(x->f)->truncations, 0);
    assert_int_equal(gr_fetcher_stats(x->f)->failed_partitions, 0);
    assert_true(gr_fetcher_active(x->f, x->part[0]));
    fx_free(x);
}

/* Fetch sessions (KIP-227) against a leader that makes them: the first Fetch is full (0, 0) with both
   partitions; the answer gives session 77; the next Fetch is incremental (77, 1) naming only partition 0,
   whose offset moved (partition 1's answer was absent: nothing taken, no error, not "no data"); then an empty
   incremental fetch (77, 2); INVALID_FETCH_SESSION_EPOCH sends it back to a full fetch closing 77 (77, 0),
   at once (no backoff); partition 1 removed: the next incremental fetch of the new session 78 forgets it. */
static void test_fetch_session(void **state)
{
    (void)state;
    fx_backoff_ms = 3000; /* a backoff would show */
    struct fx *x = fx_new(false, 1);
    fx_backoff_ms = 50;
    add(x, 0, 5);
    add(x, 1, 5);
    assert_true(until_reqs(1, 5000));
    assert_int_equal(fk.reqs[0].session_id, 0);
    assert_int_equal(fk.reqs[0].session_epoch, 0);
    assert_int_equal(fk.reqs[0].nparts, 2);
    fk_session_id = 77;
    uint8_t buf[1024];
    struct pans a[2] = {EMPTY, EMPTY};
    int p0 = fk.reqs[0].p[0].partition == 0 ? 0 : 1;
    a[p0].hw = 3;
    a[p0].log_start = 0;
    a[p0].records = buf;
    a[p0].len = mk_batch(buf, 0, 3, 5);
    answer_fetch(0, a);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 3);
    struct seen *s = &fk.reqs[1];
    assert_int_equal(s->session_id, 77);
    assert_int_equal(s->session_epoch, 1);
    assert_int_equal(s->nparts, 1); /* partition 1 unchanged: not named */
    assert_int_equal(s->p[0].partition, 0);
    assert_int_equal(s->p[0].fetch_offset, 3);
    assert_int_equal(s->nforgotten, 0);
    answer_fetch(1, (struct pans[1]){EMPTY}); /* partition 0 answered, nothing new; 1 absent */
    assert_true(until_reqs(3, 5000));
    assert_int_equal(fk.reqs[2].session_id, 77);
    assert_int_equal(fk.reqs[2].session_epoch, 2);
    assert_int_equal(fk.reqs[2].nparts, 0); /* nothing changed: an empty incremental fetch */
    assert_true(gr_fetcher_active(x->f, x->part[1]));
    fk_top_error = GR_ERR_INVALID_FETCH_SESSION_EPOCH;
    int64_t before = gr_time_mono_ms();
    answer_fetch(2, NULL);
    assert_true(until_reqs(4, 5000));
    assert_true(gr_time_mono_ms() - before < 1500); /* no backoff (3 s) for a session error */
    assert_int_equal(fk.reqs[3].session_id, 77);    /* closes 77, asks for a new one */
    assert_int_equal(fk.reqs[3].session_epoch, 0);
    assert_int_equal(fk.reqs[3].nparts, 2);
    gr_fetcher_remove(x->f, x->part[1]);
    fk_session_id = 78;
    answer_fetch(3, (struct pans[2]){EMPTY, EMPTY});
    assert_true(until_reqs(5, 5000));
    assert_int_equal(fk.reqs[4].session_id, 78);
    assert_int_equal(fk.reqs[4].session_epoch, 1);
    assert_int_equal(fk.reqs[4].nparts, 0);
    assert_int_equal(fk.reqs[4].nforgotten, 1);
    assert_int_equal(fk.reqs[4].forgotten[0], 1);
    assert_int_equal(gr_fetcher_stats(x->f)->fetches_incremental, 3);
    assert_int_equal(gr_fetcher_stats(x->f)->session_resets, 1);
    fk_session_id = 0;
    fx_free(x);
}

/* DivergingEpoch {3, 4} on a log of epochs 3 [0,4) and 4 [4,6): truncated to 4 (the end of epoch 3 here and
   at the leader), no records taken from that answer, the next fetch at 4 with LastFetchedEpoch 3. */
static void test_diverging_epoch(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    int32_t counts[] = {2, 2, 2}, epochs[] = {3, 3, 4};
    int n = feed(0, 6, 3, counts, epochs);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 6);
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.div_epoch = 3;
    a.div_end = 4;
    a.hw = 6;
    a.records = buf;
    a.len = mk_batch(buf, 6, 1, 5); /* ignored: the answer diverges */
    answer_fetch(n, &a);
    assert_true(until_reqs(n + 2, 5000));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 4);
    assert_int_equal(gr_fetcher_stats(x->f)->truncations, 1);
    assert_int_equal(fk.reqs[n + 1].p[0].fetch_offset, 4);
    assert_int_equal(fk.reqs[n + 1].p[0].last_fetched_epoch, 3);
    fx_free(x);
}

/* ---- a truncation whose reads go to the I/O pool ----
 * A simulated page cache (gr_sys.cachestat): while `cold_on`, a file is resident only once a thread other
 * than the loop's read it (the pool's); the loop thread's audit reports any call that may wait for the disk.
 */
static bool cold_on;
static pthread_t cold_loop_thread;
static ino_t cold_warm[64];
static int cold_warm_count, cold_audits, cold_completions;
static pthread_mutex_t cold_mu = PTHREAD_MUTEX_INITIALIZER;
static ev_async cold_async;

static ssize_t cold_pread(int fd, void *buf, size_t n, off_t pos)
{
    struct stat st;
    if (!pthread_equal(pthread_self(), cold_loop_thread) && fstat(fd, &st) == 0) {
        pthread_mutex_lock(&cold_mu);
        bool known = false;
        for (int i = 0; i < cold_warm_count && !known; i++)
            known = cold_warm[i] == st.st_ino;
        if (!known && cold_warm_count < 64) cold_warm[cold_warm_count++] = st.st_ino;
        pthread_mutex_unlock(&cold_mu);
    }
    return gr_sys_libc.pread(fd, buf, n, pos);
}

static int cold_cachestat(int fd, int64_t pos, int64_t len, int64_t *cached)
{
    if (!cold_on) return gr_sys_libc.cachestat(fd, pos, len, cached);
    struct stat st;
    bool warm = false;
    if (fstat(fd, &st) == 0) {
        pthread_mutex_lock(&cold_mu);
        for (int i = 0; i < cold_warm_count && !warm; i++)
            warm = cold_warm[i] == st.st_ino;
        pthread_mutex_unlock(&cold_mu);
    }
    long page = sysconf(_SC_PAGESIZE);
    *cached = warm ? (len + page - 1) / page : 0;
    return 0;
}

static void cold_audit(const char *op, int fd, const char *path)
{
    (void)fd;
    print_message("disk wait on the loop thread: %s %s\n", op, path ? path : "");
    cold_audits++;
}

static void cold_notify(void *ctx)
{
    (void)ctx;
    ev_async_send(loop, &cold_async);
}

static void cold_on_async(struct ev_loop *l, ev_async *w, int revents)
{
    (void)l, (void)w, (void)revents;
    cold_completions += gr_iopool_complete(fx_pool);
}

/* test_diverging_epoch with every page of the follower's log cold and the store's I/O pool set: the
   truncation's reads go to the pool (rounds completed on the loop), nothing on the loop thread waits for the
   disk, no Fetch is sent for the partition before the truncation is done, and the next one starts at 4. */
static void test_diverging_epoch_cold(void **state)
{
    (void)state;
    cold_loop_thread = pthread_self();
    cold_warm_count = cold_audits = cold_completions = 0;
    gr_sys.pread = cold_pread; /* while no store is open (storage/sys.h) */
    gr_sys.cachestat = cold_cachestat;
    ev_async_init(&cold_async, cold_on_async);
    ev_async_start(loop, &cold_async);
    assert_int_equal(gr_iopool_create(1, cold_notify, NULL, &fx_pool), 0);
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    int32_t counts[] = {2, 2, 2}, epochs[] = {3, 3, 4};
    int n = feed(0, 6, 3, counts, epochs);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 6);
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.div_epoch = 3;
    a.div_end = 4;
    a.hw = 6;
    a.records = buf;
    a.len = mk_batch(buf, 6, 1, 5);
    cold_warm_count = 0;
    cold_on = true;
    gr_sys_audit_this_thread(cold_audit);
    answer_fetch(n, &a);
    assert_true(until_reqs(n + 2, 5000));
    gr_sys_audit_this_thread(NULL);
    cold_on = false;
    assert_int_equal(cold_audits, 0);
    assert_true(cold_completions >= 1); /* the reads went to the pool */
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 4);
    assert_int_equal(gr_fetcher_stats(x->f)->truncations, 1);
    assert_int_equal(fk.reqs[n + 1].p[0].fetch_offset, 4); /* the first Fetch after the answer: truncated */
    assert_int_equal(fk.reqs[n + 1].p[0].last_fetched_epoch, 3);
    fx_free(x);
    gr_iopool_destroy(fx_pool);
    fx_pool = NULL;
    ev_async_stop(loop, &cold_async);
    gr_sys_reset();
}

/* Runs the loop until partition `i`'s log end offset is `end` or `ms` pass; true when it is. */
static bool until_end(struct fx *x, int i, int64_t end, int64_t ms)
{
    int64_t stop = gr_time_mono_ms() + ms;
    ev_timer guard;
    ev_timer_init(&guard, wake, 0.01, 0.01);
    ev_timer_start(loop, &guard);
    while (gr_log_end_offset(log_of(x, i)) != end && gr_time_mono_ms() < stop)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &guard);
    return gr_log_end_offset(log_of(x, i)) == end;
}

/* A cold truncation of partition 0 while the connection's Fetch for partition 1 is in flight (a long poll
   the fake leader does not answer): each pool round's end retries the truncation at once
   (gr_fetcher_flushed), so it is done without waiting for that answer; the Fetch for partition 1 does not
   name partition 0. */
static void test_cold_truncation_during_long_poll(void **state)
{
    (void)state;
    cold_loop_thread = pthread_self();
    cold_warm_count = cold_audits = cold_completions = 0;
    gr_sys.pread = cold_pread;
    gr_sys.cachestat = cold_cachestat;
    ev_async_init(&cold_async, cold_on_async);
    ev_async_start(loop, &cold_async);
    assert_int_equal(gr_iopool_create(1, cold_notify, NULL, &fx_pool), 0);
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    int32_t counts[] = {2, 2, 2}, epochs[] = {3, 3, 4};
    int n = feed(0, 6, 3, counts, epochs); /* request n: partition 0 at 6 */
    add(x, 1, 5);                          /* fetched once request n is answered */
    struct pans a = EMPTY;
    a.div_epoch = 3;
    a.div_end = 4;
    a.hw = 6;
    cold_warm_count = 0;
    cold_on = true;
    gr_sys_audit_this_thread(cold_audit);
    answer_fetch(n, &a);
    assert_true(until_reqs(n + 2, 5000)); /* request n + 1: partition 1 alone, left unanswered */
    assert_int_equal(fk.reqs[n + 1].nparts, 1);
    assert_int_equal(fk.reqs[n + 1].p[0].partition, 1);
    assert_true(until_end(x, 0, 4, 3000)); /* before request n + 1's answer (5 s request timeout) */
    gr_sys_audit_this_thread(NULL);
    cold_on = false;
    assert_int_equal(fk.nreqs, n + 2);
    assert_int_equal(cold_audits, 0);
    assert_true(cold_completions >= 1);
    assert_int_equal(gr_fetcher_stats(x->f)->truncations, 1);
    fx_free(x);
    gr_iopool_destroy(fx_pool);
    fx_pool = NULL;
    ev_async_stop(loop, &cold_async);
    gr_sys_reset();
}

/* OFFSET_OUT_OF_RANGE, leader behind (an unclean election): ListOffsets latest (ReplicaId 2) answers 4 <
   our 6: truncated to 4, fetching from there. */
static void test_out_of_range_leader_behind(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    int32_t counts[] = {2, 2, 2}, epochs[] = {5, 5, 5};
    int n = feed(0, 6, 3, counts, epochs);
    struct pans a = EMPTY;
    a.error = GR_ERR_OFFSET_OUT_OF_RANGE;
    answer_fetch(n, &a);
    assert_true(until_reqs(n + 2, 5000));
    struct seen *l = &fk.reqs[n + 1];
    assert_int_equal(l->key, 2);
    assert_int_equal(l->replica_id, 2);
    assert_int_equal(l->nparts, 1);
    assert_int_equal(l->p[0].timestamp, -1);
    assert_int_equal(l->p[0].current_leader_epoch, 5);
    answer_list(n + 1, 0, 4);
    assert_true(until_reqs(n + 3, 5000));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 4);
    assert_int_equal(fk.reqs[n + 2].key, 1);
    assert_int_equal(fk.reqs[n + 2].p[0].fetch_offset, 4);
    assert_int_equal(gr_fetcher_stats(x->f)->truncations, 1);
    fx_free(x);
}

/* OFFSET_OUT_OF_RANGE, follower behind the leader's log start: latest 100 >= our 6, then earliest 50 > 6:
   truncated fully and restarted at 50. */
static void test_out_of_range_behind_start(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    int32_t counts[] = {6}, epochs[] = {5};
    int n = feed(0, 6, 1, counts, epochs);
    struct pans a = EMPTY;
    a.error = GR_ERR_OFFSET_OUT_OF_RANGE;
    answer_fetch(n, &a);
    assert_true(until_reqs(n + 2, 5000));
    answer_list(n + 1, 0, 100);
    assert_true(until_reqs(n + 3, 5000));
    assert_int_equal(fk.reqs[n + 2].key, 2);
    assert_int_equal(fk.reqs[n + 2].p[0].timestamp, -2);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 6); /* nothing cut before the earliest answer */
    answer_list(n + 2, 0, 50);
    assert_true(until_reqs(n + 4, 5000));
    assert_int_equal(gr_log_start_offset(log_of(x, 0)), 50);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 50);
    assert_int_equal(fk.reqs[n + 3].key, 1);
    assert_int_equal(fk.reqs[n + 3].p[0].fetch_offset, 50);
    assert_int_equal(fk.reqs[n + 3].p[0].log_start_offset, 50);
    assert_int_equal(fk.reqs[n + 3].p[0].last_fetched_epoch, -1);
    fx_free(x);
}

/* FENCED_LEADER_EPOCH: no fetch for the partition until it is re-added at a newer epoch. */
static void test_fenced(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    struct pans a = EMPTY;
    a.error = GR_ERR_FENCED_LEADER_EPOCH;
    answer_fetch(0, &a);
    assert_false(until_reqs(2, 300)); /* more than the backoff (50 ms): nothing sent */
    assert_false(gr_fetcher_active(x->f, x->part[0]));
    follow(x, 0, 6);
    add(x, 0, 6);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.reqs[1].p[0].current_leader_epoch, 6);
    assert_true(gr_fetcher_active(x->f, x->part[0]));
    fx_free(x);
}

/* Two partitions of one leader share one Fetch; one removed while it is in flight gets nothing of the
   answer, the other appends its records. */
static void test_remove_in_flight(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 0);
    add(x, 0, 5);
    add(x, 1, 5);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 2);
    int want = 1; /* adds made in one pass go out in one Fetch */
    assert_true(until_reqs(want, 5000));
    struct seen *s = &fk.reqs[want - 1];
    assert_int_equal(s->nparts, 2);
    assert_true(s->p[0].partition != s->p[1].partition);
    assert_int_equal(s->p[0].partition + s->p[1].partition, 1);
    gr_fetcher_remove(x->f, x->part[0]);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 1);
    assert_false(gr_fetcher_active(x->f, x->part[0]));
    uint8_t b0[1024], b1[1024];
    struct pans a[2] = {EMPTY, EMPTY};
    for (int i = 0; i < 2; i++) {
        a[i].hw = 3;
        a[i].records = i ? b1 : b0;
        a[i].len = mk_batch(i ? b1 : b0, 0, 3, 5);
    }
    answer_fetch(want - 1, a);
    assert_true(until_reqs(want + 1, 5000));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 0);
    assert_int_equal(gr_log_end_offset(log_of(x, 1)), 3);
    assert_int_equal(fk.reqs[want].nparts, 1);
    assert_int_equal(fk.reqs[want].p[0].partition, 1);
    fx_free(x);
}

/* An answer that does not decode, then one whose size prefix is over the client's cap: each closes the
   connection (the fake sees a new one) and nothing is appended; fetching resumes on the new connection. */
static void test_bad_answers(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    uint8_t garbage[16];
    gr_put_be32(garbage, 12);
    gr_put_be32(garbage + 4, (uint32_t)fk.reqs[0].corr);
    memset(garbage + 8, 0xff, 8);
    assert_int_equal(send(fk.cfd[fk.reqs[0].client], garbage, 16, MSG_NOSIGNAL), 16);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.accepted, 2);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 0);
    uint8_t big[4];
    gr_put_be32(big, 2u << 20); /* 2 MiB announced: over the 1 MiB cap */
    assert_int_equal(send(fk.cfd[fk.reqs[1].client], big, 4, MSG_NOSIGNAL), 4);
    assert_true(until_reqs(3, 5000));
    assert_int_equal(fk.accepted, 3);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 0);
    assert_int_equal(fk.reqs[2].p[0].fetch_offset, 0);
    fx_free(x);
}

/* Storage's syncs wait while `sync_held` is set (the fsync gate's test holds the follower's flush). */
static atomic_bool sync_held;

static void sync_wait(void)
{
    while (atomic_load(&sync_held))
        usleep(1000);
}
static int held_fdatasync(int fd)
{
    sync_wait();
    return gr_sys_libc.fdatasync(fd);
}
static int held_fsync(int fd)
{
    sync_wait();
    return gr_sys_libc.fsync(fd);
}
static int held_syncfs(int fd)
{
    sync_wait();
    return gr_sys_libc.syncfs(fd);
}

/* Storage's ftruncate waits while `trunc_held` is set (a truncation's file work stays pending). */
static atomic_bool trunc_held;

static int held_ftruncate(int fd, off_t len)
{
    while (atomic_load(&trunc_held))
        usleep(1000);
    return gr_sys_libc.ftruncate(fd, len);
}

/* With the fsync gate, the fetch after an append is sent only once the log is durable to its end: while the
   flush is held no fetch goes out (the backoff period passes many times), once released the next fetch asks
   from 4 with the log durable to 4. The backstop look is an hour away: the flush binding's notification
   (gr_fetcher_flushed) is what sends it. */
static void test_fsync_gate(void **state)
{
    (void)state;
    gr_sys.fdatasync = held_fdatasync;
    gr_sys.fsync = held_fsync;
    gr_sys.syncfs = held_syncfs;
    fx_disk_poll_ms = 3600000;
    struct fx *x = fx_new(true, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    atomic_store(&sync_held, true);
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.hw = 4;
    a.records = buf;
    a.len = mk_batch(buf, 0, 4, 5);
    answer_fetch(0, &a);
    bool early = until_reqs(2, 300);
    int64_t durable_while_held = gr_log_durable_offset(log_of(x, 0));
    atomic_store(&sync_held, false);
    assert_false(early);
    assert_int_equal(durable_while_held, 0);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 4);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 4);
    assert_int_equal(fk.reqs[1].durable_at_receipt, 4);
    fx_free(x);
    fx_disk_poll_ms = 0;
    gr_sys_reset();
}

/* The race tests' clock: one ms later at every look, as if the loop's work between two looks took that
   long, so the two looks of one pass (the pump deciding what to send, the timer deciding when to look again)
   see different times; at look `flush_at` the held fsync is released and awaited there, as a flusher
   thread finishing between those two looks. */
static int64_t tclock_now(void *ctx)
{
    struct tclock *t = ctx;
    if (++t->looks == t->flush_at) {
        atomic_store(&sync_held, false);
        for (int i = 0; i < 5000 && gr_log_durable_offset(watched_log) < gr_log_end_offset(watched_log); i++)
            usleep(1000);
    }
    return ++t->ms;
}

/* With the fsync gate, the flush of what an answer appended completes while the fetcher looks (between the
   pump leaving the connection idle, gated, and the timer's arming): the next Fetch still goes out, from the
   new log end offset with the log durable to it. The flush is released at two consecutive looks, one of
   which is the timer's. (The RF 3 fault runs, seeds 1 and 2, found followers idle for good, every partition
   ready and no timer armed: the timer armed only for partitions still waiting when it looked.) */
static void test_gate_flush_between_looks(void **state)
{
    (void)state;
    gr_sys.fdatasync = held_fdatasync;
    gr_sys.fsync = held_fsync;
    gr_sys.syncfs = held_syncfs;
    struct tclock clk = {.ms = 1000};
    fx_clock = &clk;
    struct fx *x = fx_new(true, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    for (int n = 0; n < 2; n++) {
        atomic_store(&sync_held, true);
        int64_t base = fk.reqs[n].p[0].fetch_offset;
        uint8_t buf[1024];
        struct pans a = EMPTY;
        a.records = buf;
        a.len = mk_batch(buf, base, 2, 5);
        clk.flush_at = clk.looks + 6 + n;
        answer_fetch(n, &a);
        assert_true(until_reqs(n + 2, 5000));
        assert_int_equal(fk.reqs[n + 1].p[0].fetch_offset, base + 2);
        assert_int_equal(fk.reqs[n + 1].durable_at_receipt, base + 2);
    }
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 4);
    atomic_store(&sync_held, false);
    fx_free(x);
    fx_clock = NULL;
    gr_sys_reset();
}

/* NOT_LEADER_OR_FOLLOWER on every partition of a connection (one here): fetched again once
   replica.fetch.backoff.ms has passed in the fetcher's clock, even when the pump sees the backoff one ms
   short of its end and the timer's arming sees it over (with the clock one ms later at every look, one of the
   two backoffs 50 and 51 ms makes it so). (The RF 3 fault run, seed 1, found a follower idle for good after
   error 6 on every partition from one leader.) */
static void test_backoff_between_looks(void **state)
{
    (void)state;
    for (int64_t backoff = 50; backoff <= 51; backoff++) {
        struct tclock clk = {.ms = 1000};
        fx_clock = &clk;
        fx_backoff_ms = backoff;
        struct fx *x = fx_new(false, 1);
        add(x, 0, 5);
        assert_true(until_reqs(1, 5000));
        struct pans a = EMPTY;
        a.error = GR_ERR_NOT_LEADER_OR_FOLLOWER;
        int64_t answered = clk.ms;
        answer_fetch(0, &a);
        assert_true(until_reqs(2, 5000));
        assert_true(fk.reqs[1].clock_at_receipt >= answered + backoff);
        assert_int_equal(fk.reqs[1].nparts, 1);
        assert_int_equal(fk.reqs[1].p[0].fetch_offset, 0);
        assert_int_equal(fk.reqs[1].p[0].current_leader_epoch, 5);
        assert_true(gr_fetcher_active(x->f, x->part[0]));
        fx_free(x);
        fx_clock = NULL;
        fx_backoff_ms = 50;
    }
}

/* The leader's registration changes (a new broker epoch) while a Fetch is in flight, and this broker
   registers again (its own new epoch) in the same image change: the client reconnects, and once the backoff
   has passed the Fetch goes out on the new connection with ReplicaEpoch = the new epoch. */
static void test_registration_change_in_flight(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    add(x, 1, 5);
    assert_true(until_reqs(1, 5000));
    image_broker(x->img, 1, fk.port, 4);
    image_broker(x->img, 2, 1, 8);
    gr_image_changed(x->img);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.accepted, 2); /* on a new connection */
    assert_int_equal(fk.reqs[1].rs_epoch, 8);
    assert_int_equal(fk.reqs[1].nparts, 2);
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 0);
    fx_free(x);
}

/* The connection is lost and, while it is down (the leader accepts nothing: the new one waits for its
   ApiVersions answer), the owner removes both of its partitions (the connection closes) and adds them again:
   once the leader answers again, one Fetch carries both. */
static void test_readd_while_down(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    add(x, 1, 5);
    assert_true(until_reqs(1, 5000));
    ev_io_stop(loop, &fk.lw);
    fake_close(fk.reqs[0].client);
    assert_false(until_reqs(2, 300)); /* lost: backoff, reconnect, the ApiVersions unanswered */
    gr_fetcher_remove(x->f, x->part[0]);
    gr_fetcher_remove(x->f, x->part[1]);
    add(x, 0, 5);
    add(x, 1, 5);
    ev_io_start(loop, &fk.lw);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.reqs[1].nparts, 2);
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 0);
    assert_int_equal(fk.reqs[1].p[1].fetch_offset, 0);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 2);
    fx_free(x);
}

/* While a truncation's file work is pending (appends would answer -EAGAIN) the partition is not fetched;
   once it is done the fetch from the new log end offset goes out, sent by the notification of the work's end
   (the backstop look is an hour away). */
static void test_truncation_pending(void **state)
{
    (void)state;
    gr_sys.ftruncate = held_ftruncate;
    fx_disk_poll_ms = 3600000;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    int32_t counts[] = {2, 2, 2}, epochs[] = {3, 3, 4};
    int n = feed(0, 6, 3, counts, epochs);
    atomic_store(&trunc_held, true);
    struct pans a = EMPTY;
    a.div_epoch = 3;
    a.div_end = 4;
    answer_fetch(n, &a);
    bool early = until_reqs(n + 2, 300);
    bool pending = gr_log_truncation_pending(log_of(x, 0));
    atomic_store(&trunc_held, false);
    assert_false(early);
    assert_true(pending);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 4);
    assert_true(until_reqs(n + 2, 5000));
    assert_int_equal(fk.reqs[n + 1].p[0].fetch_offset, 4);
    assert_false(gr_log_truncation_pending(log_of(x, 0)));
    fx_free(x);
    fx_disk_poll_ms = 0;
    gr_sys_reset();
}

/* Re-added at a newer leader epoch while its fetch is in flight: that answer's records are not appended;
   the next fetch carries the new epoch. */
static void test_moved_in_flight(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    follow(x, 0, 6);
    add(x, 0, 6);
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.hw = 3;
    a.records = buf;
    a.len = mk_batch(buf, 0, 3, 5);
    answer_fetch(0, &a);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 0);
    assert_int_equal(fk.reqs[1].p[0].current_leader_epoch, 6);
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 0);
    assert_int_equal(fk.accepted, 1); /* same leader: same connection */
    fx_free(x);
}

/* A loopback port nothing listens on (connects to it are refused): a leader killed with kill -9. */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* The failover of issue #20's stall (make bench-cluster, kill -9 of a leader), in the orders the etcd watch
   may bring its two events: partition 0 follows live broker 1 (a Fetch parked there), partition 1 follows
   broker 3, whose connection is refused (backoff); then broker 3's registration goes (the client waits for
   a new one) and partition 1 moves to broker 1 at a newer leader epoch (ReplicaManager.makeFollowers).
   order 0: registration gone, then the move (two image changes); 1: the move, then the registration gone;
   2: both before the loop runs (one image batch). Whatever the order, partition 1 is in the next Fetch to
   broker 1 at the new epoch from its log end offset, and the connection to broker 3 is gone. */
static void move_from_dead_leader(int order)
{
    struct fx *x = fx_new(false, 1);
    image_broker(x->img, 3, dead_port(), 9);
    gr_image_changed(x->img);
    add(x, 0, 5);
    assert_int_equal(gr_fetcher_add(x->f, x->part[1], "orders", TOPIC_ID, 1, 3, 5), 0);
    assert_true(until_reqs(1, 5000));
    assert_int_equal(fk.reqs[0].nparts, 1);
    assert_false(until_reqs(2, 300)); /* broker 3 refuses, retried every 50 ms */
    if (order == 0) {
        assert_true(gr_image_remove_broker(x->img, 3));
        gr_image_changed(x->img);
        assert_false(until_reqs(2, 100));
        follow(x, 1, 6);
        add(x, 1, 6);
    } else if (order == 1) {
        follow(x, 1, 6);
        add(x, 1, 6);
        assert_false(until_reqs(2, 100));
        assert_true(gr_image_remove_broker(x->img, 3));
        gr_image_changed(x->img);
    } else {
        assert_true(gr_image_remove_broker(x->img, 3));
        gr_image_changed(x->img);
        follow(x, 1, 6);
        add(x, 1, 6);
    }
    answer_fetch(0, &EMPTY);
    assert_true(until_reqs(2, 5000));
    struct seen *s = &fk.reqs[1];
    assert_int_equal(s->nparts, 2);
    int k = s->p[0].partition == 1 ? 0 : 1;
    assert_int_equal(s->p[k].partition, 1);
    assert_int_equal(s->p[k].current_leader_epoch, 6);
    assert_int_equal(s->p[k].fetch_offset, 0);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 2);
    assert_true(gr_fetcher_active(x->f, x->part[1]));
    fx_free(x);
}

static void test_move_from_dead_leader(void **state)
{
    (void)state;
    for (int order = 0; order < 3; order++)
        move_from_dead_leader(order);
}

/* The dead leader's Fetch is in flight when the partition moves (a kill -9 whose connection stays open:
   no answer ever comes): the move alone gets it into broker 1's next Fetch, without waiting for the request
   timeout. */
static void test_move_from_silent_leader(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    image_broker(x->img, 3, fk.port, 9); /* broker 3 is the same fake: its own connection */
    gr_image_changed(x->img);
    add(x, 0, 5);
    assert_int_equal(gr_fetcher_add(x->f, x->part[1], "orders", TOPIC_ID, 1, 3, 5), 0);
    assert_true(until_reqs(2, 5000)); /* one Fetch on each connection, neither answered */
    int to3 = fk.reqs[0].p[0].partition == 1 ? 0 : 1;
    assert_int_equal(fk.reqs[to3].p[0].partition, 1);
    follow(x, 1, 6);
    add(x, 1, 6);
    answer_fetch(1 - to3, &EMPTY);
    assert_true(until_reqs(3, 5000));
    assert_int_equal(fk.reqs[2].nparts, 2);
    assert_int_equal(fk.reqs[2].client, fk.reqs[1 - to3].client);
    fx_free(x);
}

/* Records that do not continue the log end offset (storage's -ERANGE, Kafka's
   UnexpectedAppendOffsetException, which marks the partition failed): nothing appended, no more fetches until
   re-added; a re-add clears it. */
static void test_failed_append(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.hw = 6;
    a.records = buf;
    a.len = mk_batch(buf, 3, 3, 5);
    answer_fetch(0, &a);
    assert_false(until_reqs(2, 300));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 0);
    assert_int_equal(gr_fetcher_stats(x->f)->failed_partitions, 1);
    assert_false(gr_fetcher_active(x->f, x->part[0]));
    add(x, 0, 5);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 0);
    assert_true(gr_fetcher_active(x->f, x->part[0]));
    fx_free(x);
}

/* A full log dir (issue #24's disk-full nemesis): pwrite answers ENOSPC while `nospace` is set. The wrapper
   is installed before the store opens and removed after it closes (storage/sys.h's rule); only the flag
   changes meanwhile. */
static atomic_bool nospace;
static ssize_t nospace_pwrite(int fd, const void *buf, size_t n, off_t pos)
{
    if (atomic_load(&nospace)) {
        errno = ENOSPC;
        return -1;
    }
    return gr_sys_libc.pwrite(fd, buf, n, pos);
}

/* An append refused with ENOSPC leaves the partition fetched (not failed, as Kafka's storage error would):
   the same offset is fetched again after the back-off, and once space is back the records are appended. */
static void test_append_nospace_retried(void **state)
{
    (void)state;
    gr_sys.pwrite = nospace_pwrite;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    atomic_store(&nospace, true); /* the store and the partition are made: the disk fills now */
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.hw = 3;
    a.records = buf;
    a.len = mk_batch(buf, 0, 3, 5);
    answer_fetch(0, &a);
    assert_true(until_reqs(2, 5000)); /* fetched again after the back-off, from the same offset */
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 0);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 0);
    assert_int_equal(gr_fetcher_stats(x->f)->failed_partitions, 0);
    assert_int_equal(gr_fetcher_stats(x->f)->append_nospace, 1);
    assert_true(gr_fetcher_active(x->f, x->part[0]));
    atomic_store(&nospace, false);
    answer_fetch(1, &a);
    assert_true(until_reqs(3, 5000));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 3);
    assert_int_equal(fk.reqs[2].p[0].fetch_offset, 3);
    assert_int_equal(gr_fetcher_stats(x->f)->failed_partitions, 0);
    fx_free(x);
    gr_sys_reset();
}

struct remover {
    struct gr_partition_waiter w; /* first: the done hook gets it */
    struct fx *x;
    int calls;
};

static void remove_on_data(struct gr_partition_waiter *w, int err)
{
    struct remover *r = (struct remover *)w;
    (void)err;
    r->calls++;
    gr_fetcher_remove(r->x->f, r->x->part[0]);
}

/* The owner removes the last partition of a connection from inside the fetcher's callback (a data waiter
   woken by the high watermark the answer brought): the connection is closed once the callback returns, and
   nothing more is sent; the rest of that partition's answer (its log start offset) is not taken (under ASan:
   no use of the removed partition's state, which used to be freed at once). */
static void test_remove_from_callback(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    struct remover r = {.x = x};
    gr_partition_waiter_init(&r.w, remove_on_data, &r);
    gr_partition_wait_data(x->part[0], &r.w, 0);
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.hw = 3;
    a.log_start = 0; /* taken after the high watermark whose waiter removed the partition: not any more */
    a.records = buf;
    a.len = mk_batch(buf, 0, 3, 5);
    answer_fetch(0, &a);
    assert_false(until_reqs(2, 300));
    assert_int_equal(r.calls, 1);
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 3);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 0);
    assert_int_equal(fk.cfd[0], -1); /* the fake saw the connection close */
    fx_free(x);
}

/* Runs the loop until `log` ends at `end` (the fetcher appended an answer) or `ms` passed. */
static bool until_log_end(struct gr_log *log, int64_t end, int64_t ms)
{
    int64_t stop = gr_time_mono_ms() + ms;
    ev_timer guard;
    ev_timer_init(&guard, wake, 0.01, 0.01);
    ev_timer_start(loop, &guard);
    while (gr_log_end_offset(log) != end && gr_time_mono_ms() < stop)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &guard);
    return gr_log_end_offset(log) == end;
}

/* Waits (the flusher or I/O thread, up to 5 s) until `log` is durable to its end with no file work pending.
 */
static bool until_settled(struct gr_log *log)
{
    for (int i = 0; i < 5000; i++) {
        if (gr_log_durable_offset(log) >= gr_log_end_offset(log) && !gr_log_truncation_pending(log))
            return true;
        usleep(1000);
    }
    return false;
}

/* The fsync gate without the flush binding, on the test clock, the backstop an hour away: after an answer
   appended 4 records the connection's next Fetch is not sent while the flush is held, even when told (the
   log is not durable: nothing changed), nor once the flush is done but nobody told the fetcher (it does not
   poll), nor when told of another partition; it is sent when told of this one, from 4 with the log durable
   to 4. */
static void test_gate_notified(void **state)
{
    (void)state;
    gr_sys.fdatasync = held_fdatasync;
    gr_sys.fsync = held_fsync;
    gr_sys.syncfs = held_syncfs;
    struct tclock clk = {.ms = 1000};
    fx_clock = &clk;
    fx_disk_poll_ms = 3600000;
    fx_no_binding = true;
    struct fx *x = fx_new(true, 1);
    add(x, 0, 5);
    assert_true(until_reqs(1, 5000));
    atomic_store(&sync_held, true);
    uint8_t buf[1024];
    struct pans a = EMPTY;
    a.hw = 4;
    a.records = buf;
    a.len = mk_batch(buf, 0, 4, 5);
    answer_fetch(0, &a);
    assert_true(until_log_end(log_of(x, 0), 4, 5000));
    gr_fetcher_flushed(x->f, x->part[0]); /* told too early: still not durable */
    bool early = until_reqs(2, 200);
    atomic_store(&sync_held, false);
    assert_false(early);
    assert_true(until_settled(log_of(x, 0)));
    assert_false(until_reqs(2, 300));     /* durable, but not told */
    gr_fetcher_flushed(x->f, x->part[1]); /* another partition (not fetched here) */
    assert_false(until_reqs(2, 100));
    gr_fetcher_flushed(x->f, x->part[0]);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 4);
    assert_int_equal(fk.reqs[1].durable_at_receipt, 4);
    assert_int_equal(gr_fetcher_stats(x->f)->fetches_sent, 2);
    fx_free(x);
    fx_no_binding = false;
    fx_disk_poll_ms = 0;
    fx_clock = NULL;
    gr_sys_reset();
}

/* Notifications for partitions the fetcher does not fetch change nothing: one never added, one removed, the
   last one of a connection removed (the connection closed); one for a partition whose Fetch is in flight
   sends nothing more (one request per connection). The fetcher goes on: a partition added again is fetched.
 */
static void test_flushed_not_fetched(void **state)
{
    (void)state;
    struct fx *x = fx_new(true, 1);
    add(x, 0, 5);
    add(x, 1, 5);
    assert_true(until_reqs(1, 5000));
    gr_fetcher_flushed(x->f, x->part[0]); /* in flight */
    gr_fetcher_flushed(x->f, x->part[3]); /* never added */
    assert_false(until_reqs(2, 200));
    gr_fetcher_remove(x->f, x->part[1]);
    gr_fetcher_flushed(x->f, x->part[1]);
    gr_fetcher_remove(x->f, x->part[0]); /* the last: the connection closes */
    gr_fetcher_flushed(x->f, x->part[0]);
    gr_fetcher_flushed(x->f, x->part[3]);
    assert_false(until_reqs(2, 200));
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 0);
    assert_int_equal(gr_fetcher_stats(x->f)->fetches_sent, 1);
    add(x, 0, 5);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.reqs[1].nparts, 1);
    assert_int_equal(fk.reqs[1].p[0].fetch_offset, 0);
    fx_free(x);
}

struct walker {
    struct gr_partition_waiter w; /* first: the done hook gets it */
    struct fx *x;
    int calls;
};

/* A done hook that empties the connection the fetcher is walking and asks for more work inside the walk:
   removes partitions 0 and 1 (the two on it), is told of both, adds partition 2 (at the end of the list being
   walked). */
static void empty_conn_on_data(struct gr_partition_waiter *w, int err)
{
    struct walker *k = (struct walker *)w;
    (void)err;
    k->calls++;
    gr_fetcher_remove(k->x->f, k->x->part[0]);
    gr_fetcher_flushed(k->x->f, k->x->part[0]);
    gr_fetcher_remove(k->x->f, k->x->part[1]);
    gr_fetcher_flushed(k->x->f, k->x->part[1]);
    add(k->x, 2, 5);
    gr_fetcher_flushed(k->x->f, k->x->part[2]);
}

/* A truncation retried inside the pump (fp_ready) fires a done hook that removes both partitions of the
   connection being pumped, is told of them and adds a third: the pump goes on over the removed partitions
   without touching freed memory (ASan; it used to free them and the emptied connection at once), sends
   nothing for them, and partition 2 is fetched by the pump asked for when the walk ended. Partition 0 gets
   there through OFFSET_OUT_OF_RANGE: ListOffsets latest 100 then earliest 50 (truncate fully and start at 50)
   while a truncation's file work is pending (-EAGAIN: retried after GR_FETCHER_RETRY_MS); partition 1 keeps
   the connection's Fetch going meanwhile. */
static void test_remove_inside_pump(void **state)
{
    (void)state;
    gr_sys.ftruncate = held_ftruncate;
    struct tclock clk = {.ms = 1000};
    fx_clock = &clk;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    add(x, 1, 5);
    assert_true(until_reqs(1, 5000));
    assert_int_equal(fk.reqs[0].nparts, 2);
    uint8_t buf[1024];
    struct pans a[2] = {EMPTY, EMPTY};
    a[0].hw = 6;
    a[0].log_start = 0;
    a[0].records = buf;
    a[0].len = mk_batch(buf, 0, 6, 5);
    answer_fetch(0, a);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(gr_log_end_offset(log_of(x, 0)), 6);
    a[0] = EMPTY;
    a[0].error = GR_ERR_OFFSET_OUT_OF_RANGE;
    answer_fetch(1, a);
    assert_true(until_reqs(3, 5000));
    assert_int_equal(fk.reqs[2].key, 2); /* ListOffsets latest */
    atomic_store(&trunc_held, true);
    assert_int_equal(gr_partition_truncate_to(x->part[0], 5), 0); /* file work pending */
    answer_list(2, 0, 100);
    assert_true(until_reqs(4, 5000));
    assert_int_equal(fk.reqs[3].key, 2);
    assert_int_equal(fk.reqs[3].p[0].timestamp, -2); /* earliest */
    answer_list(3, 0, 50);                           /* truncate fully at 50: -EAGAIN, retried */
    assert_true(until_reqs(5, 5000));
    assert_int_equal(fk.reqs[4].key, 1);
    assert_int_equal(fk.reqs[4].nparts, 1); /* partition 1 only */
    assert_int_equal(fk.reqs[4].p[0].partition, 1);
    struct walker k = {.x = x};
    gr_partition_waiter_init(&k.w, empty_conn_on_data, &k);
    gr_partition_wait_data(x->part[0], &k.w, 5); /* woken when the retried truncation makes 50 visible */
    atomic_store(&trunc_held, false);
    assert_true(until_settled(log_of(x, 0)));
    clk.ms += 1000; /* past the retry delay */
    struct pans e[1] = {EMPTY};
    answer_fetch(4, e); /* the pump after it retries the truncation */
    assert_true(until_reqs(6, 5000));
    assert_int_equal(k.calls, 1);
    assert_int_equal(gr_log_start_offset(log_of(x, 0)), 50);
    assert_int_equal(fk.reqs[5].key, 1);
    assert_int_equal(fk.reqs[5].nparts, 1);
    assert_int_equal(fk.reqs[5].p[0].partition, 2);
    assert_false(until_reqs(7, 200));
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 1);
    assert_false(gr_fetcher_active(x->f, x->part[0]));
    assert_false(gr_fetcher_active(x->f, x->part[1]));
    assert_true(gr_fetcher_active(x->f, x->part[2]));
    fx_free(x);
    fx_clock = NULL;
    gr_sys_reset();
}

/* One pass over a metadata image (cluster/roles.c) adding a partition to an idle connection (every partition
   on it fenced: nothing in flight) and then removing another: the removal must not cancel the pump the add
   scheduled; the added partition is fetched. (The fault runs at RF 3, seed 2, found followers idle for
   good after such a pass.) */
static void test_remove_after_add(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    add(x, 0, 5);
    add(x, 2, 5);
    assert_true(until_reqs(1, 5000));
    assert_int_equal(fk.reqs[0].nparts, 2);
    struct pans a[2] = {EMPTY, EMPTY};
    a[0].error = a[1].error = GR_ERR_FENCED_LEADER_EPOCH;
    answer_fetch(0, a);
    assert_false(until_reqs(2, 300)); /* both fenced: the connection is idle */
    add(x, 1, 5);
    gr_fetcher_remove(x->f, x->part[2]);
    assert_true(until_reqs(2, 5000));
    assert_int_equal(fk.reqs[1].nparts, 1);
    assert_int_equal(fk.reqs[1].p[0].partition, 1);
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 2);
    fx_free(x);
}

/* num.replica.fetchers 2: "orders" partitions 0..3 go to fetcher ids 1, 0, 1, 0 (Kafka's getFetcherId,
   abs(31 * "orders".hashCode() + p) % 2, computed with Java), each id on its own connection. */
static void test_fetcher_ids(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 2);
    for (int i = 0; i < 4; i++)
        add(x, i, 5);
    int got[4] = {-1, -1, -1, -1};
    int64_t end = gr_time_mono_ms() + 5000;
    int seen_parts = 0, n = 0;
    while (seen_parts < 4 && gr_time_mono_ms() < end) {
        if (!until_reqs(n + 1, 5000)) break;
        struct seen *s = &fk.reqs[n];
        int id = s->client_id[strlen(s->client_id) - 1] - '0';
        for (int i = 0; i < s->nparts; i++)
            if (got[s->p[i].partition] < 0) {
                got[s->p[i].partition] = id;
                seen_parts++;
            }
        answer_fetch(n, (struct pans[PARTS_MAX]){EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY});
        n++;
    }
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 0);
    assert_int_equal(got[2], 1);
    assert_int_equal(got[3], 0);
    assert_int_equal(fk.accepted, 2);
    fx_free(x);
}

/* Bad configurations and arguments are refused. */
static void test_bad_arguments(void **state)
{
    (void)state;
    struct fx *x = fx_new(false, 1);
    char err[128] = "";
    struct gr_fetcher_config c = {
        .node_id = 2, .num_fetchers = 0, .partition_max_bytes = 1, .response_max_bytes = 1};
    assert_null(gr_fetcher_new(loop, x->bc, x->img, &c, err, sizeof err));
    assert_non_null(strstr(err, "num.replica.fetchers"));
    assert_int_equal(gr_fetcher_add(x->f, x->part[0], "orders", TOPIC_ID, 0, 2, 5), -EINVAL); /* itself */
    assert_int_equal(gr_fetcher_add(x->f, x->part[0], "", TOPIC_ID, 0, 1, 5), -EINVAL);
    assert_int_equal(gr_fetcher_add(x->f, x->part[0], "orders", TOPIC_ID, 0, 1, -1), -EINVAL);
    gr_fetcher_remove(x->f, x->part[3]); /* unknown: ignored */
    assert_int_equal(gr_fetcher_stats(x->f)->partitions, 0);
    fx_free(x);
}

int main(void)
{
    loop = ev_default_loop(0);
    ev_async_init(&fl_async, fl_on_async);
    ev_async_start(loop, &fl_async);
    ev_unref(loop); /* the binding never keeps the loop alive */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_appends),
        cmocka_unit_test(test_fetch_session),
        cmocka_unit_test(test_diverging_epoch),
        cmocka_unit_test(test_diverging_epoch_cold),
        cmocka_unit_test(test_cold_truncation_during_long_poll),
        cmocka_unit_test(test_out_of_range_leader_behind),
        cmocka_unit_test(test_out_of_range_behind_start),
        cmocka_unit_test(test_fenced),
        cmocka_unit_test(test_remove_in_flight),
        cmocka_unit_test(test_bad_answers),
        cmocka_unit_test(test_fsync_gate),
        cmocka_unit_test(test_gate_flush_between_looks),
        cmocka_unit_test(test_backoff_between_looks),
        cmocka_unit_test(test_registration_change_in_flight),
        cmocka_unit_test(test_readd_while_down),
        cmocka_unit_test(test_truncation_pending),
        cmocka_unit_test(test_moved_in_flight),
        cmocka_unit_test(test_move_from_dead_leader),
        cmocka_unit_test(test_move_from_silent_leader),
        cmocka_unit_test(test_failed_append),
        cmocka_unit_test(test_append_nospace_retried),
        cmocka_unit_test(test_remove_from_callback),
        cmocka_unit_test(test_gate_notified),
        cmocka_unit_test(test_flushed_not_fetched),
        cmocka_unit_test(test_remove_inside_pump),
        cmocka_unit_test(test_remove_after_add),
        cmocka_unit_test(test_fetcher_ids),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
