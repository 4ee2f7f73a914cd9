/*
 * test_broker_client.c: the inter-broker client (cluster/broker_client.h) against a real gregor broker
 * (GREGOR_BIN, started here on free loopback ports with its own temporary log directory, always stopped)
 * and against a fake peer in this process (a listening socket on the same loop that answers ApiVersions
 * from the codec and then misbehaves). Run by cluster/tests/etcd-tests.sh (make cluster-check); ends with
 * "broker client: N passed, N failed". An alarm bounds the run (every broker is killed when it fires).
 *
 * Covered: the ApiVersions negotiation (versions both serve; a peer lacking a required API never becomes
 * ready), a Metadata, a Produce and a Fetch round trip decoded field by field, 50 pipelined requests with
 * the in-flight bound held and answers in order, cancel (no callback after it, for a request in flight and
 * one queued), a request timeout against a stopped broker (SIGSTOP) and recovery after SIGCONT, connection
 * refused then back-off then success once a broker starts on that port, a registration change (new broker
 * epoch) closing and reopening the connection, an oversized response frame and a wrong correlation id each
 * closing the connection with a BAD_RESPONSE callback, a peer that never answers ApiVersions, an old peer
 * (ApiVersions falls back to v2 after a v0 UNSUPPORTED_VERSION answer, KIP-511; Metadata v8 goes with request
 * header v1), SASL against fake peers (a mechanism the peer does not enable, a SCRAM token over the client's
 * cap: never ready, counted, retried after the back-off; an unknown mechanism refused at new), and every
 * callback counted so none runs twice.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster/broker_client.h"
#include "cluster/image.h"
#include "cluster/tests/testkit.h"
#include "common/log.h"
#include "common/oauth_login.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"

#define TOPIC "bc-test"
#define REQS_MAX 64

static struct ev_loop *loop;
static char tmpdir[64];
static pid_t brokers[2] = {-1, -1};

static const struct gr_msg_ops *ops_named(const char *name)
{
    for (int i = 0; i < gr_msg_ops_count; i++)
        if (!strcmp(gr_msg_ops_table[i].name, name)) return &gr_msg_ops_table[i];
    fprintf(stderr, "no codec row %s\n", name);
    exit(2);
}

/* ---- brokers ---- */

static void kill_brokers(void)
{
    for (int i = 0; i < 2; i++)
        if (brokers[i] > 0) {
            kill(brokers[i], SIGCONT);
            kill(brokers[i], SIGKILL);
            waitpid(brokers[i], NULL, 0);
            brokers[i] = -1;
        }
}

static void on_alarm(int sig)
{
    (void)sig;
    for (int i = 0; i < 2; i++)
        if (brokers[i] > 0) kill(brokers[i], SIGKILL);
    static const char msg[] = "broker client: timed out\nbroker client: 0 passed, 1 failed\n";
    if (write(1, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

/* A free loopback port (bound to 0, then released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0)
        exit(2);
    close(fd);
    return ntohs(a.sin_port);
}

struct listener_wait {
    char path[128];
};

static bool listener_written(void *arg)
{
    struct listener_wait *lw = arg;
    FILE *f = fopen(lw->path, "r");
    if (!f) return false;
    int c = fgetc(f);
    fclose(f);
    return c != EOF;
}

/* Starts broker slot `i` (node.id 1) listening on 127.0.0.1:port with data in tmpdir/b<i>; waits (running
 * the loop) until it serves. Returns whether it did. */
static bool broker_start(int i, int port)
{
    char dir[80], listeners[64], lfile[160], logdirs[160], logpath[160];
    snprintf(dir, sizeof dir, "%s/b%d", tmpdir, i);
    mkdir(dir, 0700);
    snprintf(listeners, sizeof listeners, "listeners=PLAINTEXT://127.0.0.1:%d", port);
    snprintf(lfile, sizeof lfile, "gregor.listener.file=%s/listener", dir);
    snprintf(logdirs, sizeof logdirs, "log.dirs=%s/data", dir);
    snprintf(logpath, sizeof logpath, "%s/broker.log", dir);
    struct listener_wait lw;
    snprintf(lw.path, sizeof lw.path, "%s/listener", dir);
    unlink(lw.path);
    const char *bin = getenv("GREGOR_BIN");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "--override", listeners, "--override", lfile, "--override", logdirs, "--override",
              "gregor.admin.listeners=http://127.0.0.1:0", (char *)NULL); /* never the fixed 9644 */
        _exit(127);
    }
    brokers[i] = pid;
    return pid > 0 && testkit_run_until(loop, listener_written, &lw, 30000);
}

/* ---- the image ---- */

static struct gr_image *img;

static void image_broker(int32_t node_id, int port, int64_t epoch)
{
    struct gr_image_broker br = {.node_id = node_id, .epoch = epoch, .listener_count = 2};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 1; /* another listener: never the one connected to */
    snprintf(br.listeners[1].name, sizeof br.listeners[1].name, "PLAINTEXT");
    snprintf(br.listeners[1].host, sizeof br.listeners[1].host, "127.0.0.1");
    br.listeners[1].port = port;
    if (gr_image_set_broker(img, &br) != 0) exit(2);
    gr_image_changed(img);
}

/* ---- request bookkeeping ---- */

struct done {
    int calls;
    enum gr_broker_client_status status;
    int order; /* the position of this callback among all callbacks */
    int16_t version;
    /* decoded fields kept from the borrowed response */
    int16_t error_code;
    int32_t topic_count, partition_count, leader_id;
    struct gr_uuid topic_id;
    int64_t high_watermark, base_offset;
    int32_t records_len, record_count;
    bool answered;                         /* an answer handle came with the callback */
    bool keep;                             /* on_fetch: keep the answer past the callback */
    struct gr_broker_client_answer *kept;  /* ... here */
    const struct gr_fetch_response *fetch; /* ... and the response it holds */
};

static int callbacks; /* every callback, counted */
static struct done dones[REQS_MAX];

static void on_metadata(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                        struct gr_broker_client_answer *ans)
{
    struct done *d = ctx;
    d->calls++;
    d->status = st;
    d->order = callbacks++;
    d->version = version;
    d->answered = ans != NULL;
    if (st != GR_BROKER_CLIENT_OK) return;
    const struct gr_metadata_response *m = resp;
    d->topic_count = m->topics.count;
    if (m->topics.count != 1) return;
    d->error_code = m->topics.items[0].error_code;
    d->topic_id = m->topics.items[0].topic_id;
    d->partition_count = m->topics.items[0].partitions.count;
    if (d->partition_count == 1) d->leader_id = m->topics.items[0].partitions.items[0].leader_id;
}

static void on_produce(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                       struct gr_broker_client_answer *ans)
{
    struct done *d = ctx;
    d->calls++;
    d->status = st;
    d->version = version;
    d->answered = ans != NULL;
    callbacks++;
    if (st != GR_BROKER_CLIENT_OK) return;
    const struct gr_produce_response *p = resp;
    d->topic_count = p->responses.count;
    if (p->responses.count == 1 && p->responses.items[0].partition_responses.count == 1) {
        d->error_code = p->responses.items[0].partition_responses.items[0].error_code;
        d->base_offset = p->responses.items[0].partition_responses.items[0].base_offset;
    }
}

static void on_fetch(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                     struct gr_broker_client_answer *ans)
{
    struct done *d = ctx;
    d->calls++;
    d->status = st;
    d->version = version;
    callbacks++;
    if (st != GR_BROKER_CLIENT_OK) return;
    const struct gr_fetch_response *f = resp;
    d->answered = ans != NULL;
    if (d->keep && ans && (d->kept = gr_broker_client_answer_keep(ans))) d->fetch = f;
    d->topic_count = f->responses.count;
    if (f->responses.count != 1 || f->responses.items[0].partitions.count != 1) return;
    const struct gr_fetch_response_partition_data *p = &f->responses.items[0].partitions.items[0];
    d->error_code = p->error_code;
    d->high_watermark = p->high_watermark;
    d->records_len = gr_records_len(p->records);
    if (p->records.kind == GR_RECORDS_MEM && p->records.mem.len >= 61) {
        d->base_offset = gr_batch_base_offset(p->records.mem.ptr);
        d->record_count = gr_batch_record_count(p->records.mem.ptr);
    }
}

struct conn_watch {
    int ready, not_ready;
};

static void on_state(void *ctx, struct gr_broker_client_conn *conn, bool ready)
{
    (void)conn;
    struct conn_watch *w = ctx;
    if (ready)
        w->ready++;
    else
        w->not_ready++;
}

static bool is_ready(void *arg)
{
    return gr_broker_client_ready(arg);
}

static bool one_call(void *arg)
{
    return ((struct done *)arg)->calls > 0;
}

struct count_wait {
    int *counter, want;
};

static bool counted(void *arg)
{
    struct count_wait *c = arg;
    return *c->counter >= c->want;
}

static bool nothing_pending(void *arg)
{
    return gr_broker_client_pending(arg) == 0;
}

/* Sends a Metadata request for TOPIC (NULL: all topics) at the shared version. */
static struct gr_broker_client_req *send_metadata(struct gr_broker_client_conn *conn, const char *topic,
                                                  int64_t timeout_ms, struct done *d)
{
    const struct gr_msg_ops *ops = ops_named("metadata_request");
    struct gr_metadata_request m;
    gr_metadata_request_init(&m);
    struct gr_metadata_request_metadata_request_topic t;
    gr_metadata_request_metadata_request_topic_init(&t);
    t.name = gr_str_c(topic);
    m.topics.items = topic ? &t : NULL;
    m.topics.count = topic ? 1 : -1;
    m.allow_auto_topic_creation = true;
    int rc;
    memset(d, 0, sizeof *d);
    return gr_broker_client_send(conn, ops, gr_broker_client_version(conn, ops), &m, timeout_ms, on_metadata,
                                 d, &rc);
}

static struct gr_broker_client_conn *open_conn(struct gr_broker_client *bc, int32_t broker_id, int32_t index,
                                               const char *const *apis, int api_count, struct conn_watch *w)
{
    const struct gr_msg_ops *rows[GR_BROKER_CLIENT_APIS_MAX];
    for (int i = 0; i < api_count; i++)
        rows[i] = ops_named(apis[i]);
    int rc;
    memset(w, 0, sizeof *w);
    struct gr_broker_client_conn *conn = gr_broker_client_open(
        bc, broker_id, GR_BROKER_CLIENT_REPLICA_FETCHER, index, rows, api_count, on_state, w, &rc);
    CHECK(conn != NULL && rc == 0);
    return conn;
}

/* ---- scenarios ---- */

static const char *const main_apis[] = {"metadata_request", "produce_request", "fetch_request"};

/* ApiVersions picks the highest version both serve; Metadata (auto-creating TOPIC), Produce and Fetch
 * round trips decode every field checked. */
static void test_round_trips(struct gr_broker_client *bc)
{
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 1, 0, main_apis, 3, &w);
    int rc;
    CHECK(gr_broker_client_send(conn, ops_named("metadata_request"), 12, NULL, 0, on_metadata, dones, &rc) ==
              NULL &&
          rc == -ENOTCONN); /* not ready yet: refused at once */
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    CHECK(w.ready == 1 && w.not_ready == 0);
    /* Gregor serves Metadata 0..13, Produce 3..13, Fetch 4..18 (server/apis.def), as this codec does */
    CHECK(gr_broker_client_version(conn, ops_named("metadata_request")) == 13);
    CHECK(gr_broker_client_version(conn, ops_named("produce_request")) == 13);
    CHECK(gr_broker_client_version(conn, ops_named("fetch_request")) == 18);
    CHECK(gr_broker_client_stats(conn)->readies == 1);
    CHECK(gr_broker_client_send(conn, ops_named("metadata_request"), 14, NULL, 0, on_metadata, dones, &rc) ==
              NULL &&
          rc == -EPROTONOSUPPORT);

    struct done *d = &dones[0];
    for (int tries = 0; tries < 50; tries++) { /* the first answer may be LEADER_NOT_AVAILABLE */
        CHECK(send_metadata(conn, TOPIC, 0, d) != NULL);
        CHECK(testkit_run_until(loop, one_call, d, 5000));
        if (d->status == GR_BROKER_CLIENT_OK && d->error_code == GR_ERR_NONE && d->partition_count == 1)
            break;
        usleep(100000);
    }
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_OK && d->version == 13);
    CHECK(d->topic_count == 1 && d->error_code == GR_ERR_NONE && d->partition_count == 1 &&
          d->leader_id == 1);
    struct gr_uuid topic_id = d->topic_id, zero = {{0}};
    CHECK(memcmp(&topic_id, &zero, sizeof zero) != 0);

    /* Produce three records (acks=-1) */
    struct gr_record_in recs[3] = {
        {.timestamp = 1000, .key = {(const uint8_t *)"k", 1}, .value = {(const uint8_t *)"a", 1}},
        {.timestamp = 1001, .key = {NULL, -1}, .value = {(const uint8_t *)"bb", 2}},
        {.timestamp = 1002, .key = {NULL, -1}, .value = {(const uint8_t *)"ccc", 3}}};
    struct gr_batch_params bp = {
        .partition_leader_epoch = -1, .producer_id = -1, .producer_epoch = -1, .base_sequence = -1};
    uint8_t *batch;
    size_t batch_len;
    CHECK(gr_batch_build(&bp, recs, 3, &batch, &batch_len) == 0);
    struct gr_produce_request pr;
    gr_produce_request_init(&pr);
    struct gr_produce_request_topic_produce_data td;
    gr_produce_request_topic_produce_data_init(&td);
    struct gr_produce_request_partition_produce_data pd;
    gr_produce_request_partition_produce_data_init(&pd);
    pd.index = 0;
    pd.records = gr_records_mem((struct gr_bytes){batch, (int32_t)batch_len});
    td.name = gr_str_c(TOPIC);
    td.topic_id = topic_id;
    td.partition_data.items = &pd;
    td.partition_data.count = 1;
    pr.acks = -1;
    pr.timeout_ms = 5000;
    pr.topic_data.items = &td;
    pr.topic_data.count = 1;
    d = &dones[1];
    memset(d, 0, sizeof *d);
    const struct gr_msg_ops *prod = ops_named("produce_request");
    CHECK(gr_broker_client_send(conn, prod, 13, &pr, 0, on_produce, d, &rc) != NULL);
    free(batch); /* encoded at once: the caller's memory is free after the call */
    CHECK(testkit_run_until(loop, one_call, d, 10000));
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_OK && d->version == 13);
    CHECK(d->topic_count == 1 && d->error_code == GR_ERR_NONE && d->base_offset == 0);

    /* Fetch it back at v18 (topic ids, ReplicaState of a consumer) */
    struct gr_fetch_request fr;
    gr_fetch_request_init(&fr);
    struct gr_fetch_request_fetch_topic ft;
    gr_fetch_request_fetch_topic_init(&ft);
    struct gr_fetch_request_fetch_partition fp;
    gr_fetch_request_fetch_partition_init(&fp);
    fp.partition = 0;
    fp.fetch_offset = 0;
    fp.partition_max_bytes = 1 << 20;
    ft.topic_id = topic_id;
    ft.partitions.items = &fp;
    ft.partitions.count = 1;
    fr.replica_state.replica_id = -1;
    fr.replica_state.replica_epoch = -1;
    fr.max_wait_ms = 100;
    fr.min_bytes = 1;
    fr.max_bytes = 1 << 20;
    fr.topics.items = &ft;
    fr.topics.count = 1;
    d = &dones[2];
    memset(d, 0, sizeof *d);
    d->keep = true;
    CHECK(gr_broker_client_send(conn, ops_named("fetch_request"), 18, &fr, 0, on_fetch, d, &rc) != NULL);
    CHECK(testkit_run_until(loop, one_call, d, 10000));
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_OK && d->version == 18 && d->answered);
    CHECK(d->topic_count == 1 && d->error_code == GR_ERR_NONE && d->high_watermark == 3);
    CHECK(d->records_len == (int32_t)batch_len && d->base_offset == 0 && d->record_count == 3);
    /* the kept answer outlives its callback and the answers read after it: its records still validate */
    CHECK(d->kept != NULL && d->fetch != NULL);
    CHECK(send_metadata(conn, TOPIC, 0, &dones[3]) != NULL);
    CHECK(testkit_run_until(loop, one_call, &dones[3], 5000) && dones[3].answered);
    if (d->kept && d->fetch) {
        struct gr_records r = d->fetch->responses.items[0].partitions.items[0].records;
        struct gr_batch_info info;
        const char *why = NULL;
        CHECK(r.kind == GR_RECORDS_MEM && r.mem.len == (int32_t)batch_len);
        CHECK(gr_batch_validate(r.mem.ptr, (size_t)r.mem.len, &info, &why) == 0);
        CHECK(gr_batch_record_count(r.mem.ptr) == 3 && gr_batch_last_offset(r.mem.ptr) == 2);
    }
    gr_broker_client_answer_free(d->kept);
    gr_broker_client_close(conn);
}

/* 50 requests sent at once: at most in_flight_max (4) written at a time, answered in order, each once. */
static void test_pipelined(struct gr_broker_client *bc)
{
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 1, 1, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    int start = callbacks, sent = 0;
    for (int i = 0; i < 50; i++)
        sent += send_metadata(conn, TOPIC, 0, &dones[i]) != NULL;
    CHECK(sent == 50);
    CHECK(gr_broker_client_pending(conn) == 50);
    struct count_wait cw = {&callbacks, start + 50};
    CHECK(testkit_run_until(loop, counted, &cw, 20000));
    int ok = 0, in_order = 0;
    for (int i = 0; i < 50; i++) {
        ok += dones[i].calls == 1 && dones[i].status == GR_BROKER_CLIENT_OK && dones[i].topic_count == 1;
        in_order += dones[i].order == start + i;
    }
    CHECK(ok == 50);
    CHECK(in_order == 50);
    CHECK(gr_broker_client_stats(conn)->in_flight_peak == 4);
    CHECK(gr_broker_client_stats(conn)->requests_sent == 50 && gr_broker_client_stats(conn)->responses == 51);
    CHECK(callbacks == start + 50);
    gr_broker_client_close(conn);
}

/* Cancel one request in flight and one still queued: neither calls back; the others do, once each. */
static void test_cancel(struct gr_broker_client *bc)
{
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 1, 2, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    struct gr_broker_client_req *reqs[8];
    for (int i = 0; i < 8; i++)
        reqs[i] = send_metadata(conn, TOPIC, 0, &dones[i]);
    gr_broker_client_cancel(reqs[1]); /* in flight (the first four are written at once) */
    gr_broker_client_cancel(reqs[6]); /* queued */
    CHECK(gr_broker_client_pending(conn) == 7);
    CHECK(testkit_run_until(loop, nothing_pending, conn, 10000));
    int calls = 0;
    for (int i = 0; i < 8; i++)
        calls += dones[i].calls;
    CHECK(calls == 6 && dones[1].calls == 0 && dones[6].calls == 0);
    CHECK(dones[0].calls == 1 && dones[2].calls == 1 && dones[7].calls == 1 &&
          dones[7].status == GR_BROKER_CLIENT_OK);
    CHECK(gr_broker_client_stats(conn)->responses ==
          1 + 7); /* ApiVersions + 7 written, the cancelled one included */
    gr_broker_client_close(conn);
}

/* A new broker epoch in the image closes the connection (the request in flight ends DISCONNECTED) and
 * reconnects. */
static void test_registration_change(struct gr_broker_client *bc, int port)
{
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 1, 3, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    struct done *d = &dones[0];
    CHECK(send_metadata(conn, TOPIC, 0, d) != NULL);
    image_broker(1, port, 6);
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_DISCONNECTED); /* from the observer, not later */
    CHECK(w.not_ready == 1 && !gr_broker_client_ready(conn));
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    CHECK(w.ready == 2 && gr_broker_client_stats(conn)->readies == 2);
    testkit_run_until(loop, one_call, &dones[1], 300); /* nothing else arrives for it */
    CHECK(d->calls == 1);
    gr_broker_client_close(conn);
}

/* A stopped broker: the request times out (once), the connection closes; after SIGCONT it comes back. */
static void test_timeout(struct gr_broker_client *bc)
{
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 1, 4, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    kill(brokers[0], SIGSTOP);
    struct done *d = &dones[0], *behind = &dones[1];
    CHECK(send_metadata(conn, TOPIC, 500, d) != NULL);
    CHECK(send_metadata(conn, TOPIC, 60000, behind) != NULL);
    CHECK(testkit_run_until(loop, one_call, d, 10000));
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_TIMEOUT);
    CHECK(behind->calls == 1 && behind->status == GR_BROKER_CLIENT_DISCONNECTED);
    CHECK(w.not_ready == 1);
    kill(brokers[0], SIGCONT);
    CHECK(testkit_run_until(loop, is_ready, conn, 20000));
    struct done *after = &dones[2];
    CHECK(send_metadata(conn, TOPIC, 0, after) != NULL);
    CHECK(testkit_run_until(loop, one_call, after, 10000));
    CHECK(after->status == GR_BROKER_CLIENT_OK && after->error_code == GR_ERR_NONE);
    CHECK(d->calls == 1 && behind->calls == 1);
    gr_broker_client_close(conn);
}

static bool failures_at_least_two(void *arg)
{
    return gr_broker_client_stats(arg)->connect_failures >= 2;
}

/* Nothing listens: refused, back-off (200 ms), refused again; a broker started on the port is then reached.
 */
static void test_refused_then_up(struct gr_broker_client *bc)
{
    int port = free_port();
    image_broker(2, port, 1);
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 2, 0, main_apis, 1, &w);
    int64_t t0 = gr_time_mono_ms();
    CHECK(testkit_run_until(loop, failures_at_least_two, conn, 5000));
    int64_t elapsed = gr_time_mono_ms() - t0;
    const struct gr_broker_client_stats *st = gr_broker_client_stats(conn);
    CHECK(!gr_broker_client_ready(conn) && w.ready == 0);
    /* the back-off spaces the attempts: no more than one per 200 ms (plus the first) */
    CHECK(st->connects <= (uint64_t)(elapsed / 200 + 2));
    CHECK(broker_start(1, port));
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    CHECK(w.ready == 1 && st->readies == 1 && st->connect_failures >= 2);
    struct done *d = &dones[0];
    CHECK(send_metadata(conn, NULL, 0, d) != NULL);
    CHECK(testkit_run_until(loop, one_call, d, 10000));
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_OK);
    gr_broker_client_close(conn);
}

/* ---- a fake peer on the loop ---- */

enum fake_mode {
    FAKE_OVERSIZE,  /* answers ApiVersions, then any request with a size prefix over the client's cap */
    FAKE_NO_FETCH,  /* answers ApiVersions without Fetch in its list */
    FAKE_SILENT,    /* accepts and reads, never answers */
    FAKE_BAD_CORR,  /* answers ApiVersions, then any request with a wrong correlation id */
    FAKE_SASL_MECH, /* answers ApiVersions, then SaslHandshake with UNSUPPORTED_SASL_MECHANISM */
    FAKE_SASL_BIG,  /* answers ApiVersions and SaslHandshake, then SaslAuthenticate with a token over the cap
                     */
    FAKE_OAUTH,     /* an OAUTHBEARER peer refusing every token: the JSON challenge, then the failure */
    FAKE_REAUTH,    /* a PLAIN peer granting 300 ms sessions (KIP-368); answers Metadata 30 ms late */
    FAKE_OLD,       /* an old broker: ApiVersions 0..2 (UNSUPPORTED_VERSION in v0 above, KIP-511), Metadata
                       0..8 and nothing else; answers Metadata */
};

struct fake {
    enum fake_mode mode;
    int lfd, cfd;
    ev_io lw, cw;
    int accepted, frames;
    int16_t av_versions[4]; /* FAKE_OLD: the ApiVersions versions asked, in order */
    int av_count;
    int16_t header_versions[4]; /* FAKE_OLD: the request header version each Metadata came with */
    int md_count;
    /* FAKE_REAUTH */
    int auths;          /* SaslAuthenticate requests answered */
    int md_pending;     /* Metadata requests taken and not yet answered */
    int32_t md_corr[8]; /* ... their correlation ids */
    int16_t md_version; /* ... and version */
    int interleaved;    /* SASL requests that came while a Metadata answer was still owed */
    int after_expiry;   /* requests other than SASL that came after the session expired */
    int64_t expiry_ms;  /* monotonic: when the current session ends */
    ev_timer md_timer;  /* answers the pending Metadata requests */
    /* FAKE_OAUTH: the SaslAuthenticate tokens of the first attempt */
    char oauth_tok[2][4096];
    int oauth_len[2], oauth_count;
};

/* Reads exactly n bytes from a blocking socket; false at EOF or error. */
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

/* Sends one answer frame: size, response header v0 (correlation id), the body of row `ops` at `version`. */
static void fake_answer(struct fake *f, const struct gr_msg_ops *ops, const void *body, int32_t corr,
                        int16_t version)
{
    size_t len = 4 + 4 + ops->size(body, version);
    uint8_t *buf = malloc(len);
    struct gr_wr wr;
    gr_wr_init(&wr, buf, len);
    gr_wr_int32(&wr, (int32_t)(len - 4));
    gr_wr_int32(&wr, corr);
    ops->encode(&wr, body, version);
    CHECK(send(f->cfd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
    free(buf);
}

/* The request header version (1 or 2) with which header + Metadata body at `version` fill the frame exactly,
 * 0 when neither does. */
static int metadata_header_version(const uint8_t *frame, size_t n, int16_t version)
{
    int found = 0;
    for (int16_t hv = 1; hv <= 2; hv++) {
        struct gr_arena arena;
        gr_arena_init(&arena, 1 << 16);
        struct gr_rd rd;
        gr_rd_init(&rd, frame, n, &arena);
        struct gr_request_header h;
        struct gr_metadata_request m;
        gr_metadata_request_init(&m);
        if (gr_request_header_decode(&rd, hv, &h) == 0 && gr_metadata_request_decode(&rd, version, &m) == 0 &&
            gr_rd_left(&rd) == 0 && m.topics.count == 1 && gr_str_eq_c(m.topics.items[0].name, TOPIC))
            found = found ? -1 : hv;
        gr_arena_reset(&arena);
    }
    return found > 0 ? found : 0;
}

/* FAKE_OLD's answers: ApiVersions (v0 with UNSUPPORTED_VERSION above v2, as KIP-511 says) and Metadata. */
static void fake_old(struct fake *f, int16_t key, int32_t corr, int16_t version)
{
    const struct gr_msg_ops *av = ops_named("api_versions_request"), *md = ops_named("metadata_request");
    if (key == av->api_key) {
        struct gr_api_versions_response_api_version keys[2];
        gr_api_versions_response_api_version_init(&keys[0]);
        gr_api_versions_response_api_version_init(&keys[1]);
        keys[0].api_key = av->api_key, keys[0].min_version = 0, keys[0].max_version = 2;
        keys[1].api_key = md->api_key, keys[1].min_version = 0, keys[1].max_version = 8;
        struct gr_api_versions_response r;
        gr_api_versions_response_init(&r);
        r.api_keys.items = keys;
        r.api_keys.count = version > 2 ? 1 : 2;
        r.error_code = version > 2 ? GR_ERR_UNSUPPORTED_VERSION : GR_ERR_NONE;
        fake_answer(f, gr_msg_ops_find(av->api_key, true), &r, corr, version > 2 ? 0 : version);
        f->av_versions[f->av_count++ % 4] = version;
        return;
    }
    struct gr_metadata_response_metadata_response_topic t;
    gr_metadata_response_metadata_response_topic_init(&t);
    t.name = gr_str_c(TOPIC);
    struct gr_metadata_response m;
    gr_metadata_response_init(&m);
    m.topics.items = &t;
    m.topics.count = 1;
    fake_answer(f, gr_msg_ops_find(md->api_key, true), &m, corr, version);
}

/* Answers an ApiVersions request (correlation id, version) with this codec's request rows. */
static void fake_api_versions(struct fake *f, int32_t corr, int16_t version)
{
    struct gr_api_versions_response_api_version keys[64];
    int n = 0;
    for (int i = 0; i < gr_msg_ops_count && n < 64; i++) {
        const struct gr_msg_ops *o = &gr_msg_ops_table[i];
        if (o->response || (f->mode == FAKE_NO_FETCH && !strcmp(o->name, "fetch_request"))) continue;
        gr_api_versions_response_api_version_init(&keys[n]);
        keys[n].api_key = o->api_key;
        keys[n].min_version = o->version_min;
        keys[n].max_version = o->version_max;
        n++;
    }
    struct gr_api_versions_response av;
    gr_api_versions_response_init(&av);
    av.api_keys.items = keys;
    av.api_keys.count = n;
    size_t len = 4 + 4 + gr_api_versions_response_size(&av, version);
    uint8_t *buf = malloc(len);
    struct gr_wr wr;
    gr_wr_init(&wr, buf, len);
    gr_wr_int32(&wr, (int32_t)(len - 4));
    gr_wr_int32(&wr, corr); /* response header v0, as ApiVersions always has */
    gr_api_versions_response_encode(&wr, &av, version);
    CHECK(send(f->cfd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
    free(buf);
}

static void fake_close_client(struct fake *f)
{
    ev_io_stop(loop, &f->cw);
    close(f->cfd);
    f->cfd = -1;
}

static void fake_on_client(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    struct fake *f = w->data;
    uint8_t hdr[4];
    if (!read_full(f->cfd, hdr, 4)) {
        fake_close_client(f);
        return;
    }
    size_t n = gr_be32(hdr);
    uint8_t *frame = n <= (1 << 20) ? malloc(n) : NULL;
    int16_t key, version;
    int32_t corr;
    if (!frame || !read_full(f->cfd, frame, n) || gr_request_header_peek(frame, n, &key, &version, &corr)) {
        free(frame);
        fake_close_client(f);
        return;
    }
    f->frames++;
    if (f->mode == FAKE_REAUTH) {
        bool sasl = key == ops_named("sasl_handshake_request")->api_key ||
                    key == ops_named("sasl_authenticate_request")->api_key;
        if (sasl && f->md_pending) f->interleaved++;
        if (!sasl && key != ops_named("api_versions_request")->api_key && gr_time_mono_ms() > f->expiry_ms)
            f->after_expiry++;
        if (key == ops_named("metadata_request")->api_key) {
            free(frame);
            if (f->md_pending < 8) f->md_corr[f->md_pending++] = corr;
            f->md_version = version;
            if (!ev_is_active(&f->md_timer)) {
                ev_timer_set(&f->md_timer, 0.03, 0.0);
                ev_timer_start(loop, &f->md_timer);
            }
            return;
        }
    }
    if (f->mode == FAKE_OAUTH && key == ops_named("sasl_authenticate_request")->api_key &&
        f->oauth_count < 2) {
        const struct gr_msg_ops *ops = ops_named("sasl_authenticate_request");
        struct gr_arena arena;
        gr_arena_init(&arena, 1 << 16);
        struct gr_rd rd;
        gr_rd_init(&rd, frame, n, &arena);
        struct gr_request_header h;
        struct gr_sasl_authenticate_request a;
        gr_sasl_authenticate_request_init(&a);
        int i = f->oauth_count++;
        if (gr_request_header_decode(&rd, gr_request_header_version(version, ops->flexible_min), &h) == 0 &&
            gr_sasl_authenticate_request_decode(&rd, version, &a) == 0 && a.auth_bytes.len >= 0 &&
            a.auth_bytes.len < (int32_t)sizeof f->oauth_tok[i]) {
            memcpy(f->oauth_tok[i], a.auth_bytes.ptr, (size_t)a.auth_bytes.len);
            f->oauth_len[i] = a.auth_bytes.len;
        }
        gr_arena_reset(&arena);
    }
    if (f->mode == FAKE_OLD && key != ops_named("api_versions_request")->api_key)
        f->header_versions[f->md_count++ % 4] = metadata_header_version(frame, n, version);
    free(frame);
    if (f->mode == FAKE_SILENT) return;
    if (f->mode == FAKE_OLD) {
        fake_old(f, key, corr, version);
        return;
    }
    if (key == ops_named("api_versions_request")->api_key) {
        fake_api_versions(f, corr, version);
    } else if (key == ops_named("sasl_handshake_request")->api_key) {
        struct gr_str mechs[1] = {gr_str_c(f->mode == FAKE_REAUTH  ? "PLAIN"
                                           : f->mode == FAKE_OAUTH ? "OAUTHBEARER"
                                                                   : "SCRAM-SHA-256")};
        struct gr_sasl_handshake_response r;
        gr_sasl_handshake_response_init(&r);
        r.error_code = f->mode == FAKE_SASL_MECH ? GR_ERR_UNSUPPORTED_SASL_MECHANISM : GR_ERR_NONE;
        r.mechanisms.items = mechs;
        r.mechanisms.count = 1;
        fake_answer(f, gr_msg_ops_find(key, true), &r, corr, version);
    } else if (key == ops_named("sasl_authenticate_request")->api_key) {
        static uint8_t tok[8192];
        memset(tok, 'r', sizeof tok);
        struct gr_sasl_authenticate_response r;
        gr_sasl_authenticate_response_init(&r);
        r.auth_bytes = (struct gr_bytes){tok, (int32_t)sizeof tok};
        if (f->mode == FAKE_REAUTH) { /* PLAIN done: no token, a 300 ms session */
            r.auth_bytes = (struct gr_bytes){NULL, 0};
            r.session_lifetime_ms = 300;
            f->expiry_ms = gr_time_mono_ms() + 300;
            f->auths++;
        }
        static const char challenge[] = "{\"status\":\"invalid_token\"}";
        if (f->mode == FAKE_OAUTH && f->frames % 2 == 1) { /* a client-first message (odd: see the test) */
            r.auth_bytes = (struct gr_bytes){(const uint8_t *)challenge, (int32_t)strlen(challenge)};
        } else if (f->mode == FAKE_OAUTH) { /* the client's %x01 after the challenge */
            r.auth_bytes = (struct gr_bytes){NULL, 0};
            r.error_code = GR_ERR_SASL_AUTHENTICATION_FAILED;
            r.error_message = gr_str_c(challenge);
        }
        /* response header v1 from SaslAuthenticate v2 (flexible): an empty tag section after the id */
        size_t len = 4 + 4 + 1 + gr_sasl_authenticate_response_size(&r, version);
        uint8_t *buf = malloc(len);
        struct gr_wr wr;
        gr_wr_init(&wr, buf, len);
        gr_wr_int32(&wr, (int32_t)(len - 4));
        gr_wr_int32(&wr, corr);
        gr_wr_int8(&wr, 0);
        gr_sasl_authenticate_response_encode(&wr, &r, version);
        CHECK(version == 2 && send(f->cfd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
        free(buf);
    } else if (f->mode == FAKE_BAD_CORR) {
        uint8_t bad[8];
        gr_put_be32(bad, 4);
        gr_put_be32(bad + 4, (uint32_t)corr + 1000);
        CHECK(send(f->cfd, bad, 8, MSG_NOSIGNAL) == 8);
    } else {
        uint8_t big[4];
        gr_put_be32(big, 200u << 20); /* 200 MiB announced: over the default 100 MiB cap */
        CHECK(send(f->cfd, big, 4, MSG_NOSIGNAL) == 4);
    }
}

static void fake_on_accept(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    struct fake *f = w->data;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0) return;
    if (f->cfd >= 0) fake_close_client(f);
    f->cfd = fd;
    f->accepted++;
    ev_io_init(&f->cw, fake_on_client, fd, EV_READ);
    f->cw.data = f;
    ev_io_start(loop, &f->cw);
}

/* FAKE_REAUTH: answers the Metadata requests held since the timer started (an empty topic list). */
static void fake_md_due(struct ev_loop *l, ev_timer *w, int revents)
{
    (void)l;
    (void)revents;
    struct fake *f = w->data;
    struct gr_metadata_response m;
    gr_metadata_response_init(&m);
    const struct gr_msg_ops *ops = gr_msg_ops_find(ops_named("metadata_request")->api_key, true);
    for (int i = 0; i < f->md_pending && f->cfd >= 0; i++) {
        /* a flexible version's response header v1: an empty tag section after the id */
        int16_t v = f->md_version;
        int hv = gr_response_header_version(ops, v) >= 1;
        size_t len = 4 + 4 + (size_t)hv + ops->size(&m, v);
        uint8_t *buf = malloc(len);
        struct gr_wr wr;
        gr_wr_init(&wr, buf, len);
        gr_wr_int32(&wr, (int32_t)(len - 4));
        gr_wr_int32(&wr, f->md_corr[i]);
        if (hv) gr_wr_int8(&wr, 0);
        ops->encode(&wr, &m, v);
        CHECK(send(f->cfd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
        free(buf);
    }
    f->md_pending = 0;
}

/* Listens on a free loopback port; returns it. */
static int fake_start(struct fake *f, enum fake_mode mode)
{
    memset(f, 0, sizeof *f);
    f->mode = mode;
    f->cfd = -1;
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&a, sizeof a) || listen(f->lfd, 8) ||
        getsockname(f->lfd, (struct sockaddr *)&a, &al))
        exit(2);
    ev_io_init(&f->lw, fake_on_accept, f->lfd, EV_READ);
    f->lw.data = f;
    ev_timer_init(&f->md_timer, fake_md_due, 0.0, 0.0);
    f->md_timer.data = f;
    ev_io_start(loop, &f->lw);
    return ntohs(a.sin_port);
}

static void fake_stop(struct fake *f)
{
    ev_timer_stop(loop, &f->md_timer);
    if (f->cfd >= 0) fake_close_client(f);
    ev_io_stop(loop, &f->lw);
    close(f->lfd);
}

/* A response frame over the cap: the request ends BAD_RESPONSE (once), the one behind it DISCONNECTED, and
 * the connection closes (the state callback says so) before anything of that size is allocated. */
static void test_oversized_frame(struct gr_broker_client *bc)
{
    struct fake f;
    image_broker(3, fake_start(&f, FAKE_OVERSIZE), 1);
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 3, 0, main_apis, 3, &w);
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    struct done *d = &dones[0], *behind = &dones[1];
    CHECK(send_metadata(conn, TOPIC, 0, d) != NULL);
    CHECK(send_metadata(conn, TOPIC, 0, behind) != NULL);
    CHECK(testkit_run_until(loop, one_call, d, 10000));
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_BAD_RESPONSE && !d->answered);
    CHECK(behind->calls == 1 && behind->status == GR_BROKER_CLIENT_DISCONNECTED && !behind->answered);
    CHECK(w.ready == 1 && w.not_ready == 1 && !gr_broker_client_ready(conn));
    testkit_run_until(loop, one_call, &dones[2], 300);
    CHECK(d->calls == 1 && behind->calls == 1);
    gr_broker_client_close(conn);
    fake_stop(&f);
}

static bool fake_two_accepts(void *arg)
{
    return ((struct fake *)arg)->accepted >= 2;
}

/* A peer without Fetch: the exchange fails cleanly (logged), the connection never becomes ready and is
 * retried after the back-off; a connection that needs only Metadata is ready with the same peer. */
static void test_missing_api(struct gr_broker_client *bc)
{
    struct fake f;
    image_broker(4, fake_start(&f, FAKE_NO_FETCH), 1);
    struct conn_watch w, w2;
    struct gr_broker_client_conn *conn = open_conn(bc, 4, 0, main_apis, 3, &w);
    CHECK(testkit_run_until(loop, fake_two_accepts, &f, 10000));
    CHECK(w.ready == 0 && !gr_broker_client_ready(conn) &&
          gr_broker_client_stats(conn)->connect_failures >= 1);
    CHECK(gr_broker_client_version(conn, ops_named("fetch_request")) == -1);
    gr_broker_client_close(conn);
    struct gr_broker_client_conn *meta = open_conn(bc, 4, 1, main_apis, 1, &w2);
    CHECK(testkit_run_until(loop, is_ready, meta, 10000));
    CHECK(gr_broker_client_version(meta, ops_named("fetch_request")) == -1);
    CHECK(gr_broker_client_version(meta, ops_named("metadata_request")) == 13);
    gr_broker_client_close(meta);
    fake_stop(&f);
}

static bool fake_two_frames(void *arg)
{
    return ((struct fake *)arg)->frames >= 2;
}

static bool handshake_failed(void *arg)
{
    return gr_broker_client_stats(arg)->connect_failures >= 1;
}

/* A peer that accepts and never answers ApiVersions: the exchange times out (request_timeout_ms), counts as
 * a failed connection, and is tried again after the back-off; the owner never hears "ready". */
static void test_silent_peer(struct gr_broker_client *bc)
{
    struct fake f;
    image_broker(5, fake_start(&f, FAKE_SILENT), 1);
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 5, 0, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, handshake_failed, conn, 10000));
    CHECK(
        testkit_run_until(loop, fake_two_frames, &f, 10000)); /* ApiVersions sent again after the back-off */
    CHECK(f.accepted == 2 && w.ready == 0 && w.not_ready == 0 && !gr_broker_client_ready(conn));
    int rc = 0;
    struct done *d = &dones[0];
    memset(d, 0, sizeof *d);
    CHECK(send_metadata(conn, TOPIC, 0, d) == NULL);
    CHECK(gr_broker_client_send(conn, ops_named("metadata_request"), 12, NULL, 0, on_metadata, d, &rc) ==
              NULL &&
          rc == -ENOTCONN);
    gr_broker_client_close(conn);
    CHECK(d->calls == 0);
    fake_stop(&f);
}

/* An answer with another correlation id: that request ends BAD_RESPONSE, the connection closes. */
static void test_bad_correlation(struct gr_broker_client *bc)
{
    struct fake f;
    image_broker(6, fake_start(&f, FAKE_BAD_CORR), 1);
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 6, 0, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    struct done *d = &dones[0];
    CHECK(send_metadata(conn, TOPIC, 0, d) != NULL);
    CHECK(testkit_run_until(loop, one_call, d, 10000));
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_BAD_RESPONSE);
    CHECK(w.not_ready == 1 && !gr_broker_client_ready(conn));
    gr_broker_client_close(conn);
    fake_stop(&f);
}

/* An old peer: ApiVersions at our highest version gets UNSUPPORTED_VERSION in v0 listing v0..2 (KIP-511);
 * the client asks again at v2 on the same connection, is ready with Metadata v8 as the shared version, and a
 * Metadata v8 request goes with request header v1 (not flexible) and is answered. */
static void test_old_peer(struct gr_broker_client *bc)
{
    struct fake f;
    image_broker(8, fake_start(&f, FAKE_OLD), 1);
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 8, 0, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, is_ready, conn, 10000));
    CHECK(f.accepted == 1 && f.av_count == 2 &&
          f.av_versions[0] == ops_named("api_versions_request")->version_max && f.av_versions[1] == 2);
    CHECK(gr_broker_client_version(conn, ops_named("metadata_request")) == 8);
    CHECK(gr_broker_client_version(conn, ops_named("fetch_request")) == -1);
    struct done *d = &dones[0];
    CHECK(send_metadata(conn, TOPIC, 0, d) != NULL);
    CHECK(testkit_run_until(loop, one_call, d, 10000));
    CHECK(d->calls == 1 && d->status == GR_BROKER_CLIENT_OK && d->version == 8 && d->topic_count == 1);
    CHECK(f.md_count == 1 && f.header_versions[0] == 1);
    gr_broker_client_close(conn);
    fake_stop(&f);
}

static bool sasl_failed_twice(void *arg)
{
    return gr_broker_client_stats(arg)->sasl_failures >= 2;
}

/* SASL against fake peers (a SASL client of its own): a peer that does not enable the mechanism, and one
 * whose SCRAM server-first token is over GR_SCRAM_CLIENT_TOKEN_MAX (8192 bytes), each fail the attempt (never
 * ready, counted, logged) and are tried again after the back-off; an unknown mechanism is refused at new. */
static void test_sasl_fakes(void)
{
    char err[128] = "";
    struct gr_broker_client_config cfg = {.node_id = 9,
                                          .listener_name = "PLAINTEXT",
                                          .request_timeout_ms = 2000,
                                          .backoff_ms = 200,
                                          .sasl_mechanism = "GSSAPI",
                                          .sasl_username = "broker",
                                          .sasl_password = "pw"};
    CHECK(gr_broker_client_new(loop, img, &cfg, err, sizeof err) == NULL && strstr(err, "SASL mechanism"));
    cfg.sasl_mechanism = "SCRAM-SHA-512";
    struct gr_broker_client *sbc = gr_broker_client_new(loop, img, &cfg, err, sizeof err);
    CHECK(sbc != NULL);
    if (!sbc) return;
    enum fake_mode modes[2] = {FAKE_SASL_MECH, FAKE_SASL_BIG};
    for (int i = 0; i < 2; i++) {
        struct fake f;
        image_broker(10 + i, fake_start(&f, modes[i]), 1);
        struct conn_watch w;
        struct gr_broker_client_conn *conn = open_conn(sbc, 10 + i, 0, main_apis, 1, &w);
        CHECK(testkit_run_until(loop, sasl_failed_twice, conn, 10000));
        const struct gr_broker_client_stats *st = gr_broker_client_stats(conn);
        CHECK(w.ready == 0 && !gr_broker_client_ready(conn) && st->sasl_auths == 0 && f.accepted >= 2 &&
              st->connect_failures >= 2);
        /* handshake (and, for the big token, the client-first) per attempt: no spinning */
        CHECK(f.frames <= (int)(st->connects * 3));
        gr_broker_client_close(conn);
        fake_stop(&f);
    }
    gr_broker_client_free(sbc);
}

/* KIP-368 against a fake PLAIN peer granting 300 ms sessions and answering Metadata 30 ms late, while the
 * owner keeps one Metadata request going at all times (each callback sends the next): the connection
 * re-authenticates in band again and again (SaslHandshake + SaslAuthenticate on the same socket, one
 * connect, ready once), never while a Metadata answer is owed, never lets the session run out before a
 * request, and every request ends OK. */
struct reauth_run {
    struct gr_broker_client_conn *conn;
    struct done d;
    int ok, bad;
};

static void on_reauth_md(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                         struct gr_broker_client_answer *ans)
{
    (void)resp;
    (void)version;
    (void)ans;
    struct reauth_run *r = ctx;
    if (st == GR_BROKER_CLIENT_OK)
        r->ok++;
    else
        r->bad++;
    const struct gr_msg_ops *ops = ops_named("metadata_request");
    struct gr_metadata_request m;
    gr_metadata_request_init(&m);
    int rc;
    if (!gr_broker_client_send(r->conn, ops, gr_broker_client_version(r->conn, ops), &m, 0, on_reauth_md, r,
                               &rc))
        r->bad++;
}

static bool reauthed_four(void *arg)
{
    return gr_broker_client_stats(arg)->sasl_reauths >= 4;
}

static void test_sasl_reauth(void)
{
    char err[128] = "";
    struct gr_broker_client_config cfg = {.node_id = 9,
                                          .listener_name = "PLAINTEXT",
                                          .request_timeout_ms = 2000,
                                          .backoff_ms = 200,
                                          .sasl_mechanism = "PLAIN",
                                          .sasl_username = "broker",
                                          .sasl_password = "pw"};
    struct gr_broker_client *sbc = gr_broker_client_new(loop, img, &cfg, err, sizeof err);
    CHECK(sbc != NULL);
    if (!sbc) return;
    struct fake f;
    image_broker(12, fake_start(&f, FAKE_REAUTH), 1);
    struct conn_watch w;
    struct reauth_run r = {0};
    r.conn = open_conn(sbc, 12, 0, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, is_ready, r.conn, 5000));
    on_reauth_md(&r, GR_BROKER_CLIENT_OK, NULL, 0, NULL); /* starts the chain (counted as one OK) */
    CHECK(testkit_run_until(loop, reauthed_four, r.conn, 10000));
    const struct gr_broker_client_stats *st = gr_broker_client_stats(r.conn);
    CHECK(st->sasl_reauths >= 4 && st->sasl_auths == st->sasl_reauths + 1 && f.auths == (int)st->sasl_auths);
    CHECK(st->connects == 1 && w.ready == 1 && w.not_ready == 0 && f.accepted == 1);
    CHECK(f.interleaved == 0 && f.after_expiry == 0);
    CHECK(r.bad == 0 && r.ok > 8);
    gr_broker_client_close(r.conn);
    fake_stop(&f);
    gr_broker_client_free(sbc);
}

/* OAUTHBEARER against a fake peer that refuses every token as Kafka's broker does (the JSON challenge, then
 * SASL_AUTHENTICATION_FAILED after the client's %x01): the client-first message is RFC 7628's
 * "n,,^Aauth=Bearer <unsecured JWS>^A^A", the challenge is answered with a lone %x01, and the attempt fails
 * (never ready, retried after the back-off). Without a login the client is refused at new. */
static void test_sasl_oauth(void)
{
    char err[256] = "";
    struct gr_oauth_login *lg = gr_oauth_login_new();
    CHECK(lg && gr_oauth_login_option(lg, "unsecuredLoginStringClaim_sub", "broker", err, sizeof err) == 0 &&
          gr_oauth_login_check(lg, err, sizeof err) == 0);
    struct gr_broker_client_config cfg = {.node_id = 9,
                                          .listener_name = "PLAINTEXT",
                                          .request_timeout_ms = 2000,
                                          .backoff_ms = 200,
                                          .sasl_mechanism = "OAUTHBEARER"};
    CHECK(gr_broker_client_new(loop, img, &cfg, err, sizeof err) == NULL && strstr(err, "OAUTHBEARER login"));
    cfg.sasl_oauth_login = lg;
    struct gr_broker_client *sbc = gr_broker_client_new(loop, img, &cfg, err, sizeof err);
    CHECK(sbc != NULL);
    if (!sbc) {
        gr_oauth_login_free(lg);
        return;
    }
    struct fake f;
    image_broker(13, fake_start(&f, FAKE_OAUTH), 1);
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(sbc, 13, 0, main_apis, 1, &w);
    CHECK(testkit_run_until(loop, sasl_failed_twice, conn, 10000));
    /* frames of one attempt: ApiVersions, SaslHandshake, the client-first (3rd, odd), the %x01 (4th) */
    const char *t = f.oauth_tok[0];
    int n = f.oauth_len[0];
    static const char pre[] = "n,,\x01"
                              "auth=Bearer ";
    CHECK(n > (int)sizeof pre + 2 && !memcmp(t, pre, sizeof pre - 1) && !memcmp(t + n - 2, "\x01\x01", 2));
    /* the token: three base64url parts, the last (the signature) empty; header {"alg":"none"} */
    const char *tok = t + sizeof pre - 1;
    int tl = n - (int)(sizeof pre - 1) - 2;
    int dots = 0;
    for (int i = 0; i < tl; i++)
        dots += tok[i] == '.';
    CHECK(tl > 20 && dots == 2 && tok[tl - 1] == '.' && !memcmp(tok, "eyJhbGciOiJub25lIn0.", 20));
    CHECK(f.oauth_len[1] == 1 && f.oauth_tok[1][0] == 1);
    const struct gr_broker_client_stats *st = gr_broker_client_stats(conn);
    CHECK(w.ready == 0 && st->sasl_auths == 0 && st->sasl_failures >= 2 && f.accepted >= 2);
    gr_broker_client_close(conn);
    fake_stop(&f);
    gr_broker_client_free(sbc);
    gr_oauth_login_free(lg);
}

/* Bad configurations are refused with a reason; a second open of one key is -EEXIST. */
/* The names the fetcher's logs print instead of the enum's number. */
static void test_status_names(void)
{
    CHECK(strcmp(gr_broker_client_status_name(GR_BROKER_CLIENT_OK), "ok") == 0);
    CHECK(strcmp(gr_broker_client_status_name(GR_BROKER_CLIENT_TIMEOUT), "timeout") == 0);
    CHECK(strcmp(gr_broker_client_status_name(GR_BROKER_CLIENT_DISCONNECTED), "disconnected") == 0);
    CHECK(strcmp(gr_broker_client_status_name(GR_BROKER_CLIENT_BAD_RESPONSE), "bad response") == 0);
    CHECK(strcmp(gr_broker_client_status_name((enum gr_broker_client_status)99), "unknown") == 0);
}

static void test_config(struct gr_broker_client *bc)
{
    char err[128] = "";
    struct gr_broker_client_config c = {.node_id = 9, .listener_name = "", .request_timeout_ms = 1};
    CHECK(gr_broker_client_new(loop, img, &c, err, sizeof err) == NULL && strstr(err, "listener name"));
    c.listener_name = "PLAINTEXT";
    c.request_timeout_ms = 0;
    CHECK(gr_broker_client_new(loop, img, &c, err, sizeof err) == NULL && strstr(err, "timeout"));
    c.request_timeout_ms = 1;
    c.in_flight_max = GR_BROKER_CLIENT_IN_FLIGHT_MAX + 1;
    CHECK(gr_broker_client_new(loop, img, &c, err, sizeof err) == NULL && strstr(err, "in-flight"));
    /* certificate reload swaps the context of an SSL client only (the contexts are never used here: no
       connection is opened, so stand-ins do) */
    char ctx_a, ctx_b;
    CHECK(gr_broker_client_set_tls_ctx(bc, (struct ssl_ctx_st *)&ctx_b) == -EINVAL); /* PLAINTEXT stays */
    c.in_flight_max = 0;
    c.tls_ctx = (struct ssl_ctx_st *)&ctx_a;
    struct gr_broker_client *tbc = gr_broker_client_new(loop, img, &c, err, sizeof err);
    CHECK(tbc != NULL);
    if (tbc) {
        CHECK(gr_broker_client_set_tls_ctx(tbc, NULL) == -EINVAL);
        CHECK(gr_broker_client_set_tls_ctx(tbc, (struct ssl_ctx_st *)&ctx_b) == 0);
        gr_broker_client_free(tbc);
    }
    struct conn_watch w;
    struct gr_broker_client_conn *conn = open_conn(bc, 7, 0, main_apis, 1, &w);
    int rc = 0;
    CHECK(gr_broker_client_open(bc, 7, GR_BROKER_CLIENT_REPLICA_FETCHER, 0, NULL, 0, NULL, NULL, &rc) ==
              NULL &&
          rc == -EEXIST);
    const struct gr_msg_ops *resp_row = gr_msg_ops_find(ops_named("fetch_request")->api_key, true);
    CHECK(gr_broker_client_open(bc, 7, GR_BROKER_CLIENT_REPLICA_FETCHER, 1, &resp_row, 1, NULL, NULL, &rc) ==
              NULL &&
          rc == -EINVAL);
    /* broker 7 is not registered: the connection waits, no attempt is made */
    testkit_run_until(loop, is_ready, conn, 200);
    CHECK(gr_broker_client_stats(conn)->connects == 0 && !gr_broker_client_ready(conn));
    gr_broker_client_close(conn);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    alarm(150);
    if (!getenv("GREGOR_BIN")) {
        printf("broker client: GREGOR_BIN not set\nbroker client: 0 passed, 1 failed\n");
        return 1;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gregor-bc-test.XXXXXX");
    if (!mkdtemp(tmpdir)) return 2;
    loop = ev_default_loop(0);
    img = gr_image_new(9);
    int port = free_port();
    bool up = broker_start(0, port);
    CHECK(up);
    image_broker(1, port, 5);
    char err[128];
    struct gr_broker_client_config cfg = {.node_id = 9,
                                          .listener_name = "PLAINTEXT",
                                          .request_timeout_ms = 2000,
                                          .backoff_ms = 200,
                                          .in_flight_max = 4};
    struct gr_broker_client *bc = gr_broker_client_new(loop, img, &cfg, err, sizeof err);
    CHECK(bc != NULL);
    test_status_names();
    if (up && bc) {
        test_config(bc);
        test_round_trips(bc);
        test_pipelined(bc);
        test_cancel(bc);
        test_registration_change(bc, port);
        test_timeout(bc);
        test_refused_then_up(bc);
        test_oversized_frame(bc);
        test_missing_api(bc);
        test_silent_peer(bc);
        test_bad_correlation(bc);
        test_old_peer(bc);
        test_sasl_fakes();
        test_sasl_reauth();
        test_sasl_oauth();
    }
    gr_broker_client_free(bc);
    gr_image_free(img);
    kill_brokers();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (failed == 0 && system(cmd) != 0) printf("could not remove %s\n", tmpdir);
    if (failed) printf("broker client: logs kept in %s\n", tmpdir);
    printf("broker client: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
