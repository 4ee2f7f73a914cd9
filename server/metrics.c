/*
 * metrics.c: the broker's counters and the /metrics page (server/metrics.h).
 */
#include "server/metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cluster/controller.h"
#include "cluster/fetcher.h"
#include "server/fetch_session.h"
#include "common/time.h"
#include "cluster/image.h"
#include "protocol/errors.h"
#include "server/apis.h"
#include "server/broker.h"
#include "server/route.h"
#include "server/tls.h"
#include "storage/store.h"

#ifndef GREGOR_REVISION
#define GREGOR_REVISION "unknown"
#endif

struct gr_metrics_topic {
    char *name; /* NULL: empty slot */
    struct gr_topic_counters c;
};

void gr_metrics_init(struct gr_metrics *m)
{
    memset(m, 0, sizeof *m);
    m->start_time_ms = gr_time_wall_ms();
}

void gr_metrics_free(struct gr_metrics *m)
{
    for (size_t i = 0; i < m->topic_cap; i++)
        free(m->topics[i].name);
    free(m->topics);
    m->topics = NULL;
    m->topic_cap = m->topic_count = 0;
    gr_metrics_status_free(&m->status);
    gr_reqtime_free(m->reqtime); /* server/request_metrics.h */
    m->reqtime = NULL;
}

void gr_metrics_request(struct gr_metrics *m, int16_t key, int16_t version)
{
    if (key < 0 || key >= GR_METRICS_API_KEYS || version < 0 || version >= GR_METRICS_API_VERSIONS) return;
    m->requests[key][version]++;
}

static uint64_t hash_name(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static struct gr_metrics_topic *slot_for(struct gr_metrics_topic *tab, size_t cap, const char *s, size_t len)
{
    for (size_t i = hash_name(s, len) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!tab[i].name || (strlen(tab[i].name) == len && !memcmp(tab[i].name, s, len))) return &tab[i];
}

/* The counters of `topic`, made on its first count; NULL out of memory (only the overall ones count). */
static struct gr_topic_counters *topic_counters(struct gr_metrics *m, const char *s, size_t len)
{
    if (m->topic_cap) {
        struct gr_metrics_topic *t = slot_for(m->topics, m->topic_cap, s, len);
        if (t->name) return &t->c;
    }
    if ((m->topic_count + 1) * 2 > m->topic_cap) { /* at most half full */
        size_t cap = m->topic_cap ? m->topic_cap * 2 : 64;
        struct gr_metrics_topic *tab = calloc(cap, sizeof *tab);
        if (!tab) return NULL;
        for (size_t i = 0; i < m->topic_cap; i++)
            if (m->topics[i].name)
                *slot_for(tab, cap, m->topics[i].name, strlen(m->topics[i].name)) = m->topics[i];
        free(m->topics);
        m->topics = tab;
        m->topic_cap = cap;
    }
    struct gr_metrics_topic *t = slot_for(m->topics, m->topic_cap, s, len);
    if (!(t->name = strndup(s, len))) return NULL;
    m->topic_count++;
    return &t->c;
}

void gr_metrics_produced(struct gr_metrics *m, const char *topic, size_t topic_len, uint64_t records,
                         uint64_t bytes)
{
    struct gr_topic_counters *cs[2] = {&m->all, topic_counters(m, topic, topic_len)};
    for (int i = 0; i < 2; i++)
        if (cs[i]) {
            cs[i]->messages_in += records;
            cs[i]->bytes_in += bytes;
        }
}

void gr_metrics_produce_partition(struct gr_metrics *m, const char *topic, size_t topic_len)
{
    struct gr_topic_counters *cs[2] = {&m->all, topic_counters(m, topic, topic_len)};
    for (int i = 0; i < 2; i++)
        if (cs[i]) cs[i]->produce_requests++;
}

void gr_metrics_produce_refused(struct gr_metrics *m, const struct gr_image_topic *it, int16_t error_code)
{
    /* KafkaApis answers these before ReplicaManager.appendRecords (not marked); appendToLocalLog marks the
       rest (not leader, storage error, an internal topic) before it refuses them */
    bool before = error_code == GR_ERR_UNKNOWN_TOPIC_OR_PARTITION || error_code == GR_ERR_UNKNOWN_TOPIC_ID ||
                  error_code == GR_ERR_INVALID_REQUIRED_ACKS ||
                  error_code == GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (it && !before) gr_metrics_produce_partition(m, it->name, (size_t)it->name_len);
}

void gr_metrics_fetched(struct gr_metrics *m, const char *topic, size_t topic_len, uint64_t bytes)
{
    struct gr_topic_counters *cs[2] = {&m->all, topic_counters(m, topic, topic_len)};
    for (int i = 0; i < 2; i++)
        if (cs[i]) cs[i]->bytes_out += bytes;
}

void gr_metrics_fetch_partition(struct gr_metrics *m, const char *topic, size_t topic_len)
{
    struct gr_topic_counters *cs[2] = {&m->all, topic_counters(m, topic, topic_len)};
    for (int i = 0; i < 2; i++)
        if (cs[i]) cs[i]->fetch_requests++;
}

void gr_metrics_appended(struct gr_metrics *m, const struct gr_image_topic *it,
                         const struct gr_produce_result *r, size_t bytes)
{
    gr_metrics_produce_partition(m, it->name, (size_t)it->name_len); /* whatever the outcome, as Kafka */
    if (r->error_code) { /* ReplicaManager.appendToLocalLog / UnifiedLog: failed or rejected, per topic too */
        struct gr_topic_counters *cs[2] = {&m->all, topic_counters(m, it->name, (size_t)it->name_len)};
        for (int i = 0; i < 2; i++)
            if (cs[i] && r->error_code == GR_ERR_MESSAGE_TOO_LARGE)
                cs[i]->bytes_rejected += bytes;
            else if (cs[i] && gr_metrics_counts_produce_failed(r->error_code))
                cs[i]->failed_produce++;
    }
    if (r->error_code || r->duplicate) return;
    gr_metrics_produced(m, it->name, (size_t)it->name_len, (uint64_t)(r->end_offset - r->base_offset), bytes);
}

void gr_metrics_answered(struct gr_req *req)
{
    gr_metrics_counts_answered(req); /* errors_total, replication bytes out (server/metrics_counts.h) */
    if (req->hdr.request_api_key != GR_API_FETCH || !req->body || !req->resp) return;
    const struct gr_fetch_request *body = req->body;
    const struct gr_fetch_response *resp = req->resp;
    bool v15 = req->hdr.request_api_version >= 15;
    bool follower =
        (v15 ? body->replica_state.replica_id : body->replica_id) >= 0; /* counted as replication */
    for (int32_t i = 0; i < resp->responses.count && i < body->topics.count; i++) {
        const struct gr_fetch_response_fetchable_topic_response *rt = &resp->responses.items[i];
        const struct gr_fetch_request_fetch_topic *qt = &body->topics.items[i];
        const struct gr_image_topic *t =
            gr_route_topic_by(req->broker, req->hdr.request_api_version >= 13, qt->topic, qt->topic_id.b);
        if (!t) continue; /* an unknown topic: nothing to count it under */
        for (int32_t p = 0; p < rt->partitions.count; p++) {
            int16_t ec = rt->partitions.items[p].error_code;
            /* ReplicaManager.fetchMessages marks TotalFetchRequestsPerSec for every partition it read, a
               follower's too, errors included; KafkaApis answers a partition unknown to the metadata before
               reading (not marked) */
            if (ec != GR_ERR_UNKNOWN_TOPIC_OR_PARTITION && ec != GR_ERR_UNKNOWN_TOPIC_ID)
                gr_metrics_fetch_partition(&req->broker->metrics, t->name, (size_t)t->name_len);
            if (gr_metrics_counts_fetch_failed(ec)) { /* readFromLog */
                struct gr_topic_counters *cs[2] = {
                    &req->broker->metrics.all,
                    topic_counters(&req->broker->metrics, t->name, (size_t)t->name_len)};
                for (int k = 0; k < 2; k++)
                    if (cs[k]) cs[k]->failed_fetch++;
            }
            if (follower) continue;
            int32_t len = gr_records_len(rt->partitions.items[p].records);
            gr_metrics_fetched(&req->broker->metrics, t->name, (size_t)t->name_len,
                               len > 0 ? (uint64_t)len : 0);
        }
    }
}

const struct gr_topic_counters *gr_metrics_topic(const struct gr_metrics *m, const char *topic)
{
    if (!m->topic_cap) return NULL;
    struct gr_metrics_topic *t = slot_for(m->topics, m->topic_cap, topic, strlen(topic));
    return t->name ? &t->c : NULL;
}

static const struct {
    const char *name;
    size_t offset;
} topic_families[] = {
    {"kafka_server_brokertopicmetrics_messagesin_total", offsetof(struct gr_topic_counters, messages_in)},
    {"kafka_server_brokertopicmetrics_bytesin_total", offsetof(struct gr_topic_counters, bytes_in)},
    {"kafka_server_brokertopicmetrics_bytesout_total", offsetof(struct gr_topic_counters, bytes_out)},
    {"kafka_server_brokertopicmetrics_totalproducerequests_total",
     offsetof(struct gr_topic_counters, produce_requests)},
    {"kafka_server_brokertopicmetrics_totalfetchrequests_total",
     offsetof(struct gr_topic_counters, fetch_requests)},
    {"kafka_server_brokertopicmetrics_failedproducerequests_total",
     offsetof(struct gr_topic_counters, failed_produce)},
    {"kafka_server_brokertopicmetrics_failedfetchrequests_total",
     offsetof(struct gr_topic_counters, failed_fetch)},
    {"kafka_server_brokertopicmetrics_bytesrejected_total",
     offsetof(struct gr_topic_counters, bytes_rejected)},
};

static uint64_t field(const struct gr_topic_counters *c, size_t offset)
{
    uint64_t v;
    memcpy(&v, (const char *)c + offset, sizeof v);
    return v;
}

bool gr_metrics_render_counters(const struct gr_metrics *m, const char *const *topics, int ntopics,
                                struct gr_prom_buf *out)
{
    static const struct gr_topic_counters zero;
    for (size_t f = 0; f < sizeof topic_families / sizeof topic_families[0]; f++) {
        const char *name = topic_families[f].name;
        gr_prom_type(out, name, "counter");
        gr_prom_sample_u64(out, name, NULL, 0, field(&m->all, topic_families[f].offset));
        for (int i = 0; i < ntopics; i++) {
            const struct gr_topic_counters *c = gr_metrics_topic(m, topics[i]);
            struct gr_prom_label l = {"topic", topics[i]};
            gr_prom_sample_u64(out, name, &l, 1, field(c ? c : &zero, topic_families[f].offset));
        }
    }
    const char *rq = "kafka_network_requestmetrics_requests_total";
    gr_prom_type(out, rq, "counter");
    int napis;
    const struct gr_api *apis = gr_api_table(&napis);
    for (int i = 0; i < napis; i++) {
        int16_t key = apis[i].api_key;
        if (key < 0 || key >= GR_METRICS_API_KEYS) continue;
        for (int v = 0; v < GR_METRICS_API_VERSIONS; v++) {
            if (!m->requests[key][v])
                continue; /* only versions seen: a series appears on its first request */
            char ver[8];
            snprintf(ver, sizeof ver, "%d", v);
            struct gr_prom_label l[2] = {{"request", apis[i].name}, {"version", ver}};
            gr_prom_sample_u64(out, rq, l, 2, m->requests[key][v]);
        }
        if (key == GR_API_FETCH)
            gr_metrics_counts_render_fetch_split(&m->counts, out); /* FetchConsumer/Follower */
    }
    return !out->failed;
}

/* /proc/self figures; a figure that cannot be read is left out rather than reported as 0. */
static void render_process(const struct gr_metrics *m, struct gr_prom_buf *out)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *p = strrchr(buf, ')'); /* comm may hold spaces: fields count from after it */
        unsigned long utime, stime;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2) {
            double tck = (double)sysconf(_SC_CLK_TCK);
            gr_prom_type(out, "process_cpu_seconds_total", "counter");
            gr_prom_sample(out, "process_cpu_seconds_total", NULL, 0, (double)(utime + stime) / tck);
        }
    }
    if ((f = fopen("/proc/self/statm", "re"))) {
        unsigned long size, resident;
        if (fscanf(f, "%lu %lu", &size, &resident) == 2) {
            gr_prom_type(out, "process_resident_memory_bytes", "gauge");
            gr_prom_sample_u64(out, "process_resident_memory_bytes", NULL, 0,
                               (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE));
        }
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        uint64_t n = 0;
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.') n++;
        closedir(d);
        gr_prom_type(out, "process_open_fds", "gauge");
        gr_prom_sample_u64(out, "process_open_fds", NULL, 0, n - 1); /* less the directory's own descriptor */
    }
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        gr_prom_type(out, "process_max_fds", "gauge");
        gr_prom_sample(out, "process_max_fds", NULL, 0,
                       rl.rlim_cur == RLIM_INFINITY ? (double)INFINITY : (double)rl.rlim_cur);
    }
    gr_prom_type(out, "process_start_time_seconds", "gauge");
    gr_prom_sample(out, "process_start_time_seconds", NULL, 0, (double)m->start_time_ms / 1000.0);
}

static const struct {
    const char *name;
    int which;
} log_families[] = {
    {"kafka_log_log_size", 0},
    {"kafka_log_log_logstartoffset", 1},
    {"kafka_log_log_logendoffset", 2},
    {"kafka_log_log_numlogsegments", 3},
};

/* One partition held here, as the log families show it. */
struct log_row {
    char *topic; /* owned: the slices outlive the loop iteration */
    int32_t partition;
    int64_t v[4]; /* log_families' values, by `which` */
};

struct gr_metrics_log_slice {
    struct log_row *rows;
    int64_t n;
    size_t family; /* log_families index being written */
    int64_t next;  /* its next row */
    bool typed;    /* its # TYPE line written */
};

void gr_metrics_log_slice_free(struct gr_metrics_log_slice *st)
{
    if (!st) return;
    for (int64_t i = 0; i < st->n; i++)
        free(st->rows[i].topic);
    free(st->rows);
    free(st);
}

/* The counters and the snapshot of the partitions held here; NULL out of memory. */
static struct gr_metrics_log_slice *head_start(struct gr_broker *b, struct gr_prom_buf *out)
{
    struct gr_metrics *m = &b->metrics;
    int ntopics = gr_store_topic_count(b->store);
    const char **names = calloc((size_t)ntopics + 1, sizeof *names);
    if (!names) return NULL;
    int64_t held = 0;
    for (int i = 0; i < ntopics; i++) {
        struct gr_topic *t = gr_store_topic_at(b->store, i);
        names[i] = gr_topic_name(t);
        for (int32_t p = 0; p < gr_topic_partition_count(t); p++)
            held += gr_topic_log(t, p) != NULL;
    }
    gr_metrics_render_counters(m, names, ntopics, out);
    free(names);
    struct gr_metrics_log_slice *st = calloc(1, sizeof *st);
    if (!st || !(st->rows = calloc((size_t)held + 1, sizeof *st->rows))) {
        free(st);
        return NULL;
    }
    for (int i = 0; i < ntopics; i++) {
        struct gr_topic *t = gr_store_topic_at(b->store, i);
        for (int32_t p = 0; p < gr_topic_partition_count(t) && st->n < held; p++) {
            struct gr_log *log = gr_topic_log(t, p);
            if (!log) continue; /* a partition this broker does not hold */
            struct log_row *r = &st->rows[st->n];
            if (!(r->topic = strdup(gr_topic_name(t)))) {
                gr_metrics_log_slice_free(st);
                return NULL;
            }
            st->n++;
            r->partition = p;
            r->v[0] = gr_log_size_bytes(log);
            r->v[1] = gr_log_start_offset(log);
            r->v[2] = gr_log_end_offset(log);
            r->v[3] = gr_log_segment_count(log);
        }
    }
    return st;
}

int gr_metrics_render_head_step(struct gr_broker *b, struct gr_metrics_log_slice **state, size_t budget,
                                struct gr_prom_buf *out)
{
    struct gr_metrics_log_slice *st = *state;
    if (!st && !(st = *state = head_start(b, out))) {
        out->failed = true;
        return -1;
    }
    for (; st->family < sizeof log_families / sizeof log_families[0];
         st->family++, st->next = 0, st->typed = false) {
        const char *name = log_families[st->family].name;
        if (!st->typed) gr_prom_type(out, name, "gauge");
        st->typed = true;
        for (; st->next < st->n; st->next++) {
            if (out->len >= budget) return out->failed ? -1 : 1; /* the rest next time */
            const struct log_row *r = &st->rows[st->next];
            char ps[16];
            snprintf(ps, sizeof ps, "%d", r->partition);
            struct gr_prom_label l[2] = {{"topic", r->topic}, {"partition", ps}};
            gr_prom_sample(out, name, l, 2, (double)r->v[log_families[st->family].which]);
        }
    }
    const char *cc = "kafka_controller_kafkacontroller_activecontrollercount";
    gr_prom_type(out, cc, "gauge");
    /* single node: this broker is the controller; cluster mode: while it holds the controller epoch */
    gr_prom_sample(out, cc, NULL, 0,
                   !b->member ? 1.0 : (b->controller && gr_controller_epoch(b->controller)));
    gr_metrics_log_slice_free(st);
    *state = NULL;
    return out->failed ? -1 : 0;
}

/* KIP-227's counts (server/fetch_session.h): sessions and their partitions now, Fetch requests by kind. */
static void render_fetch_sessions(const struct gr_fsess_counts *k, struct gr_prom_buf *out)
{
    gr_prom_type(out, "gregor_fetch_sessions", "gauge");
    gr_prom_sample(out, "gregor_fetch_sessions", NULL, 0, (double)k->sessions);
    gr_prom_type(out, "gregor_fetch_session_partitions", "gauge");
    gr_prom_sample(out, "gregor_fetch_session_partitions", NULL, 0, (double)k->partitions);
    const char *rn = "gregor_fetch_session_requests_total";
    gr_prom_type(out, rn, "counter");
    const char *kinds[4] = {"full", "incremental", "sessionless", "error"};
    uint64_t v[4] = {k->full, k->incremental, k->sessionless, k->errors};
    for (int i = 0; i < 4; i++)
        gr_prom_sample_u64(out, rn, (struct gr_prom_label[1]){{"kind", kinds[i]}}, 1, v[i]);
}

bool gr_metrics_render_tail(struct gr_broker *b, struct gr_prom_buf *out)
{
    struct gr_metrics *m = &b->metrics;
    render_process(m, out);
    bool typed = false;
    for (int i = 0; i < b->listener_count; i++) {
        const struct gr_listener *l = &b->listeners[i];
        if (!l->tls_ctx) continue; /* SSL and SASL_SSL listeners only */
        const char *tc = "gregor_tls_connections_total";
        if (!typed) gr_prom_type(out, tc, "counter");
        typed = true;
        static const char *const path[2] = {
            [GR_TLS_SEND_USERSPACE] = "userspace", [GR_TLS_SEND_KTLS] = "ktls"};
        for (int p = 0; p < 2; p++) {
            struct gr_prom_label tl[2] = {{"listener", l->name}, {"send", path[p]}};
            gr_prom_sample_u64(out, tc, tl, 2, l->tls_connections[p]);
        }
    }
    render_fetch_sessions(&b->fetch_session_counts, out);
    gr_prom_type(out, "gregor_build_info", "gauge");
    struct gr_prom_label bl[2] = {{"version", m->version ? m->version : ""}, {"revision", GREGOR_REVISION}};
    gr_prom_sample(out, "gregor_build_info", bl, 2, 1);
    return !out->failed;
}
