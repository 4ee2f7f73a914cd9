/*
 * replay.c: a cheap Kafka load generator for broker-limited benchmarks. It is its own tiny client (no
 * librdkafka, nothing linked from Gregor): it encodes one request once, with raw bytes, and replays it so
 * that the broker, not the client, is the limit. Modes:
 *
 *   produce       one Produce v7 request (RecordBatch v2, CRC-32C, optional zstd) built once, replayed
 *                 pipelined over --conns connections with at most --inflight requests outstanding on each;
 *                 optionally rate-limited (--rate requests/s) with per-request latency percentiles
 *   fetch         Fetch v11 sequentially through a topic from offset 0 to the high watermark seen in the
 *                 first response, one request in flight (what a single consumer does)
 *   create        CreateTopics v4 (with topic configs), then Metadata v8 until every partition has a leader,
 *                 then one probe produce per partition until it is acknowledged
 *   idle          opens --conns connections, one ApiVersions v0 each, prints "ready N", holds them until
 *                 stdin closes (idle-connection memory and latency workloads)
 *   first-produce connect/Metadata(auto-create)/Produce in a loop until the first produce is acknowledged;
 *                 prints the time since the broker process started (--since-ns CLOCK_MONOTONIC stamp, or
 *                 --pid: the process start time from /proc, 10 ms resolution)
 * Every mode prints one JSON object on stdout; exit status 0 only when no request failed.
 *
 * Invariants: requests use header v1 (classic client id) and non-flexible versions that Apache Kafka 4.x
 * and Gregor both serve (Produce 7, Fetch 11, Metadata 8, CreateTopics 4, ApiVersions 0); responses on a
 * connection arrive in request order, so correlation ids are only checked, never used to match. Sizes read
 * from the wire are checked against the bytes received before use.
 *
 * Wire formats (big-endian; Kafka's message definitions):
 *   request frame   OFFSET SIZE MEANING
 *                   0      4    size of the rest
 *                   4      2    api key
 *                   6      2    api version
 *                   8      4    correlation id
 *                   12     2+n  client id (int16 length + bytes)
 *                   14+n   -    body
 *   Produce v7 body: transactional id (nullable string, -1), acks int16, timeout ms int32,
 *                    [topic name string, [partition int32, records (int32 length + batches)]]
 *   RecordBatch v2:  see protocol/record_batch.h (61-byte header, CRC-32C over attributes..end)
 *   Record:          length varint, attributes int8, timestamp delta varlong, offset delta varint,
 *                    key length varint (-1 null), value length varint, value, header count varint
 * Read next: bench/run.py (the orchestrator), bench/rdk_perf.c (the librdkafka client).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define CLIENT_ID "gregor-bench-replay"
#define CONNS_MAX 4096
#define INFLIGHT_MAX 1024
#define TOPIC_NAME_BYTES_MAX 200
#define FRAME_BYTES_MAX (256 * 1024 * 1024) /* largest response accepted */
#define DRAIN_TIMEOUT_NS (30LL * 1000000000LL)

enum { API_PRODUCE = 0, API_FETCH = 1, API_METADATA = 3, API_API_VERSIONS = 18, API_CREATE_TOPICS = 19 };

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "replay: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* ---- growable byte buffer, big-endian writers ---- */

struct buf {
    uint8_t *p;
    size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t more)
{
    if (b->len + more <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) die("%s", "out of memory");
    b->cap = cap;
}
static void put_raw(struct buf *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}
static void put_i8(struct buf *b, int8_t v)
{
    put_raw(b, &v, 1);
}
static void put_i16(struct buf *b, int16_t v)
{
    uint16_t x = htons((uint16_t)v);
    put_raw(b, &x, 2);
}
static void put_i32(struct buf *b, int32_t v)
{
    uint32_t x = htonl((uint32_t)v);
    put_raw(b, &x, 4);
}
static void put_i64(struct buf *b, int64_t v)
{
    put_i32(b, (int32_t)((uint64_t)v >> 32));
    put_i32(b, (int32_t)(uint64_t)v);
}
static void put_str(struct buf *b, const char *s)
{
    if (!s) {
        put_i16(b, -1);
        return;
    }
    put_i16(b, (int16_t)strlen(s));
    put_raw(b, s, strlen(s));
}
static void put_varint(struct buf *b, int64_t v) /* zig-zag varlong; varint is the same for 32-bit values */
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        put_i8(b, (int8_t)((z & 0x7f) | 0x80));
        z >>= 7;
    }
    put_i8(b, (int8_t)z);
}
static void set_i32(uint8_t *p, int32_t v)
{
    uint32_t x = htonl((uint32_t)v);
    memcpy(p, &x, 4);
}
static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static uint64_t be64(const uint8_t *p)
{
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

/* Request header v1 into `b` after a 4-byte size placeholder; finish with frame_done. */
static void frame_start(struct buf *b, int16_t key, int16_t version, int32_t corr)
{
    b->len = 0;
    put_i32(b, 0);
    put_i16(b, key);
    put_i16(b, version);
    put_i32(b, corr);
    put_str(b, CLIENT_ID);
}
static void frame_done(struct buf *b)
{
    set_i32(b->p, (int32_t)(b->len - 4));
}

/* ---- a bounds-checked reader over a response ---- */

struct rd {
    const uint8_t *p, *end;
    bool bad;
};
static bool rd_need(struct rd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        r->p = r->end;
        return false;
    }
    return true;
}
static int8_t rd_i8(struct rd *r)
{
    return rd_need(r, 1) ? (int8_t)*r->p++ : 0;
}
static int16_t rd_i16(struct rd *r)
{
    if (!rd_need(r, 2)) return 0;
    int16_t v = (int16_t)((r->p[0] << 8) | r->p[1]);
    r->p += 2;
    return v;
}
static int32_t rd_i32(struct rd *r)
{
    if (!rd_need(r, 4)) return 0;
    int32_t v = (int32_t)be32(r->p);
    r->p += 4;
    return v;
}
static int64_t rd_i64(struct rd *r)
{
    if (!rd_need(r, 8)) return 0;
    int64_t v = (int64_t)be64(r->p);
    r->p += 8;
    return v;
}
static void rd_skip(struct rd *r, int64_t n)
{
    if (n > 0 && rd_need(r, (size_t)n)) r->p += n;
}
static void rd_skip_str(struct rd *r)
{
    rd_skip(r, rd_i16(r));
}
/* An array count; a count that cannot fit in the bytes left (min_elem_bytes each) marks the reader bad. */
static int32_t rd_count(struct rd *r, size_t min_elem_bytes)
{
    int32_t n = rd_i32(r);
    if (n < 0) return 0;
    if ((size_t)(r->end - r->p) < (size_t)n * min_elem_bytes) {
        r->bad = true;
        return 0;
    }
    return n;
}

/* ---- CRC-32C (Castagnoli, reflected 0x82F63B78), table-driven: computed once per batch built ---- */

static uint32_t crc32c(const uint8_t *p, size_t n)
{
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* ---- RecordBatch v2 ---- */

/* Fills `v` with `n` random upper-case letters (Kafka's ProducerPerformance payload: compressible like text).
 */
static void fill_payload(uint8_t *v, size_t n, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (uint8_t)('A' + (*seed >> 33) % 26);
    }
}

/* Builds one batch of `count` records of `value_bytes` each (null keys), codec 0 (none) or 4 (zstd). */
static void build_batch(struct buf *out, int count, int value_bytes, int codec, int64_t ts_ms)
{
    struct buf recs = {0};
    uint8_t *value = malloc((size_t)value_bytes + 1);
    uint64_t seed = 42;
    for (int i = 0; i < count; i++) {
        fill_payload(value, (size_t)value_bytes, &seed);
        struct buf body = {0};
        put_i8(&body, 0);               /* attributes */
        put_varint(&body, 0);           /* timestamp delta */
        put_varint(&body, i);           /* offset delta */
        put_varint(&body, -1);          /* key: null */
        put_varint(&body, value_bytes); /* value */
        put_raw(&body, value, (size_t)value_bytes);
        put_varint(&body, 0); /* headers */
        put_varint(&recs, (int64_t)body.len);
        put_raw(&recs, body.p, body.len);
        free(body.p);
    }
    free(value);
    if (codec == 4) {
        size_t cap = ZSTD_compressBound(recs.len);
        uint8_t *z = malloc(cap);
        size_t zn = ZSTD_compress(z, cap, recs.p, recs.len, 3);
        if (ZSTD_isError(zn)) die("zstd: %s", ZSTD_getErrorName(zn));
        free(recs.p);
        recs = (struct buf){z, zn, cap};
    }
    out->len = 0;
    put_i64(out, 0);                        /* base offset (the broker assigns) */
    put_i32(out, (int32_t)(49 + recs.len)); /* batch length: bytes after this field */
    put_i32(out, -1);                       /* partition leader epoch */
    put_i8(out, 2);                         /* magic */
    put_i32(out, 0);                        /* CRC, set below */
    put_i16(out, (int16_t)codec);           /* attributes */
    put_i32(out, count - 1);                /* last offset delta */
    put_i64(out, ts_ms);                    /* base timestamp */
    put_i64(out, ts_ms);                    /* max timestamp */
    put_i64(out, -1);                       /* producer id */
    put_i16(out, -1);                       /* producer epoch */
    put_i32(out, -1);                       /* base sequence */
    put_i32(out, count);                    /* record count */
    put_raw(out, recs.p, recs.len);
    set_i32(out->p + 17, (int32_t)crc32c(out->p + 21, out->len - 21));
    free(recs.p);
}

/* ---- options ---- */

struct opts {
    const char *mode;
    char host[64];
    int port;
    const char *topic;
    int partitions;
    int *partition_ids; /* the partitions produce writes: --partition-ids, default 0..partitions-1 */
    int record_bytes;
    int batch_bytes;   /* records per batch = max(1, batch_bytes / record_bytes) */
    int batch_records; /* overrides batch_bytes when > 0 */
    int acks;
    int codec;
    int conns;
    int inflight;
    double seconds;
    long long requests; /* produce: stop after this many requests (0 = run for --seconds) */
    double rate;        /* requests per second, 0 = unlimited */
    bool round_robin;   /* one partition per request instead of all partitions per request */
    int fetch_partition_bytes;
    int fetch_max_bytes;
    const char *configs[32];
    int nconfigs;
    int64_t since_ns;
    int pid;
    const char *listener_file;
    int timeout_ms;
};

static void set_bootstrap(struct opts *o, const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon - s >= (long)sizeof o->host) die("bad --bootstrap %s (host:port)", s);
    memcpy(o->host, s, (size_t)(colon - s));
    o->host[colon - s] = 0;
    o->port = atoi(colon + 1);
}

/* ---- sockets ---- */

static int tcp_connect(const struct opts *o, bool quiet)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &sa.sin_addr) != 1) die("bad host %s (IPv4 literal)", o->host);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (!quiet) fprintf(stderr, "replay: connect %s:%d: %s\n", o->host, o->port, strerror(errno));
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Blocking request/response: sends the frame in `req`, reads one response frame into `resp` (after the
 * size prefix, starting with the correlation id). Returns 0 or -1 (connection error / bad size). */
static int roundtrip(int fd, const struct buf *req, struct buf *resp)
{
    if (write_all(fd, req->p, req->len) < 0) return -1;
    uint8_t sz[4];
    if (read_all(fd, sz, 4) < 0) return -1;
    int32_t n = (int32_t)be32(sz);
    if (n < 4 || n > FRAME_BYTES_MAX) return -1;
    resp->len = 0;
    buf_reserve(resp, (size_t)n);
    if (read_all(fd, resp->p, (size_t)n) < 0) return -1;
    resp->len = (size_t)n;
    return 0;
}

/* ---- Produce request and response ---- */

/* The shared part of a produce request. all-partitions form: `tail` is the whole body; round-robin form:
 * `prefix` is the body up to the partition index and `tail` is records length + batch. */
struct produce_req {
    struct buf prefix, tail;
    int records_per_batch;
    size_t batch_wire_bytes;
    int batches_per_request;
    int64_t value_bytes_per_request;
};

static void produce_req_build(const struct opts *o, struct produce_req *pr)
{
    struct buf batch = {0};
    pr->records_per_batch = o->batch_records > 0 ? o->batch_records : o->batch_bytes / o->record_bytes;
    if (pr->records_per_batch < 1) pr->records_per_batch = 1;
    build_batch(&batch, pr->records_per_batch, o->record_bytes, o->codec, wall_ms());
    pr->batch_wire_bytes = batch.len;
    struct buf *b = o->round_robin ? &pr->prefix : &pr->tail;
    put_i16(b, -1); /* transactional id: null */
    put_i16(b, (int16_t)o->acks);
    put_i32(b, o->timeout_ms);
    put_i32(b, 1);
    put_str(b, o->topic);
    if (o->round_robin) {
        put_i32(b, 1); /* then the partition index, per request */
        put_i32(&pr->tail, (int32_t)batch.len);
        put_raw(&pr->tail, batch.p, batch.len);
        pr->batches_per_request = 1;
    } else {
        put_i32(b, o->partitions);
        for (int p = 0; p < o->partitions; p++) {
            put_i32(b, o->partition_ids[p]);
            put_i32(b, (int32_t)batch.len);
            put_raw(b, batch.p, batch.len);
        }
        pr->batches_per_request = o->partitions;
    }
    pr->value_bytes_per_request = (int64_t)pr->batches_per_request * pr->records_per_batch * o->record_bytes;
    free(batch.p);
}

struct produce_result {
    int partitions_ok;
    int partitions_failed;
    int16_t first_error;
};

/* Parses a Produce v7 response body (after the correlation id). */
static void produce_resp_parse(struct rd *r, struct produce_result *res)
{
    int32_t nt = rd_count(r, 6);
    for (int32_t t = 0; t < nt && !r->bad; t++) {
        rd_skip_str(r);
        int32_t np = rd_count(r, 30);
        for (int32_t p = 0; p < np && !r->bad; p++) {
            rd_i32(r);
            int16_t err = rd_i16(r);
            rd_i64(r); /* base offset */
            rd_i64(r); /* log append time */
            rd_i64(r); /* log start offset */
            if (err) {
                res->partitions_failed++;
                if (!res->first_error) res->first_error = err;
            } else {
                res->partitions_ok++;
            }
        }
    }
    rd_i32(r); /* throttle */
}

/* ---- the pipelined engine ---- */

struct conn {
    int fd;
    uint8_t head[512]; /* this request's frame head: size, header, and (round-robin) body prefix + index */
    size_t head_len;
    size_t tx_off; /* bytes of head + tail written for the request being sent */
    bool tx_active;
    int inflight;
    int32_t next_corr, expect_corr;
    int64_t sent_ns[INFLIGHT_MAX]; /* ring, by correlation id, for latency */
    uint8_t *rx;
    size_t rx_len, rx_cap;
};

struct stats {
    int64_t requests_ok, requests_failed, records, value_bytes, wire_bytes;
    int16_t first_error;
    int64_t *lat_ns;
    size_t nlat, cap_lat;
};

static void lat_add(struct stats *s, int64_t ns)
{
    if (s->nlat == s->cap_lat) {
        s->cap_lat = s->cap_lat ? s->cap_lat * 2 : 4096;
        s->lat_ns = realloc(s->lat_ns, s->cap_lat * sizeof *s->lat_ns);
        if (!s->lat_ns) die("%s", "out of memory");
    }
    s->lat_ns[s->nlat++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(const struct stats *s, double q)
{
    if (!s->nlat) return -1;
    size_t i = (size_t)(q * (double)(s->nlat - 1) + 0.5);
    return (double)s->lat_ns[i] / 1e6;
}

static void conn_start_request(struct conn *c, const struct opts *o, const struct produce_req *pr,
                               int64_t rr_index, int64_t sched_ns)
{
    /* Fits: header 14 + client id, prefix <= 18 + TOPIC_NAME_BYTES_MAX, index 4 (checked in main). */
    struct buf h = {c->head, 0, sizeof c->head};
    int32_t corr = c->next_corr++;
    frame_start(&h, API_PRODUCE, 7, corr);
    if (o->round_robin) {
        put_raw(&h, pr->prefix.p, pr->prefix.len);
        put_i32(&h, (int32_t)o->partition_ids[rr_index % o->partitions]);
    }
    c->head_len = h.len;
    set_i32(c->head, (int32_t)(h.len - 4 + pr->tail.len));
    c->tx_off = 0;
    c->tx_active = true;
    c->inflight++;
    c->sent_ns[corr % INFLIGHT_MAX] = sched_ns;
}

/* Writes what the socket takes of the current request. Returns -1 on a connection error. */
static int conn_write(struct conn *c, const struct produce_req *pr)
{
    while (c->tx_active) {
        struct iovec iov[2];
        int n = 0;
        size_t total = c->head_len + pr->tail.len;
        if (c->tx_off < c->head_len) iov[n++] = (struct iovec){c->head + c->tx_off, c->head_len - c->tx_off};
        size_t toff = c->tx_off > c->head_len ? c->tx_off - c->head_len : 0;
        iov[n++] = (struct iovec){pr->tail.p + toff, pr->tail.len - toff};
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) return 0;
        if (w <= 0) return -1;
        c->tx_off += (size_t)w;
        if (c->tx_off == total) c->tx_active = false;
    }
    return 0;
}

/* Reads and handles complete responses. Returns -1 on a connection error or an unparsable response. */
static int conn_read(struct conn *c, const struct produce_req *pr, struct stats *st, int64_t t_now, bool lat)
{
    for (;;) {
        if (c->rx_cap - c->rx_len < 65536) {
            c->rx_cap = c->rx_cap ? c->rx_cap * 2 : 262144;
            c->rx = realloc(c->rx, c->rx_cap);
            if (!c->rx) die("%s", "out of memory");
        }
        ssize_t r = read(c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) break;
        if (r <= 0) return -1;
        c->rx_len += (size_t)r;
    }
    size_t off = 0;
    while (c->rx_len - off >= 4) {
        int32_t n = (int32_t)be32(c->rx + off);
        if (n < 4 || n > FRAME_BYTES_MAX) return -1;
        if (c->rx_len - off - 4 < (size_t)n) break;
        struct rd r = {c->rx + off + 4, c->rx + off + 4 + n, false};
        int32_t corr = rd_i32(&r);
        if (corr != c->expect_corr) {
            fprintf(stderr, "replay: correlation id %d, expected %d\n", corr, c->expect_corr);
            return -1;
        }
        struct produce_result res = {0};
        produce_resp_parse(&r, &res);
        if (r.bad) {
            fprintf(stderr, "replay: unparsable produce response\n");
            return -1;
        }
        if (res.partitions_failed || res.partitions_ok != pr->batches_per_request) {
            st->requests_failed++;
            if (!st->first_error) st->first_error = res.first_error ? res.first_error : -1;
        } else {
            st->requests_ok++;
            st->records += (int64_t)pr->batches_per_request * pr->records_per_batch;
            st->value_bytes += pr->value_bytes_per_request;
            st->wire_bytes += (int64_t)(c->head_len + pr->tail.len);
        }
        if (lat) lat_add(st, t_now - c->sent_ns[corr % INFLIGHT_MAX]);
        c->expect_corr++;
        c->inflight--;
        off += 4 + (size_t)n;
    }
    memmove(c->rx, c->rx + off, c->rx_len - off);
    c->rx_len -= off;
    return 0;
}

static void print_latency_json(struct stats *st)
{
    qsort(st->lat_ns, st->nlat, sizeof *st->lat_ns, cmp_i64);
    printf(", \"lat_count\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f",
           st->nlat, pct_ms(st, 0.50), pct_ms(st, 0.99), pct_ms(st, 0.999), pct_ms(st, 1.0));
}

static int run_produce(const struct opts *o)
{
    if (o->acks == 0) die("%s", "acks=0 has no responses to count; use 1 or -1");
    if (o->conns < 1 || o->conns > CONNS_MAX || o->inflight < 1 || o->inflight > INFLIGHT_MAX)
        die("%s", "--conns 1..4096 and --inflight 1..1024");
    struct produce_req pr = {0};
    produce_req_build(o, &pr);
    struct conn *cs = calloc((size_t)o->conns, sizeof *cs);
    struct pollfd *pfd = calloc((size_t)o->conns, sizeof *pfd);
    for (int i = 0; i < o->conns; i++) {
        cs[i].fd = tcp_connect(o, false);
        if (cs[i].fd < 0) return 2;
        fcntl(cs[i].fd, F_SETFL, O_NONBLOCK);
        cs[i].next_corr = cs[i].expect_corr = 1;
    }
    struct stats st = {0};
    bool lat = o->rate > 0;
    int64_t t0 = now_ns(), end = t0 + (int64_t)(o->seconds * 1e9), next_send = t0, t_last = t0;
    int64_t interval = lat ? (int64_t)(1e9 / o->rate) : 0, rr = 0;
    int total_inflight = 0;
    bool failed = false;
    for (;;) {
        int64_t t = now_ns();
        bool sending = t < end && (!o->requests || rr < o->requests);
        if (!sending && total_inflight == 0) break;
        if (!sending && t > end + DRAIN_TIMEOUT_NS) {
            fprintf(stderr, "replay: %d requests unanswered after 30 s\n", total_inflight);
            failed = true;
            break;
        }
        /* Issue new requests: unlimited = fill every connection; rate-limited = on schedule. */
        for (int i = 0; sending && !lat && i < o->conns; i++) {
            struct conn *c = &cs[i];
            while (!c->tx_active && c->inflight < o->inflight && (!o->requests || rr < o->requests)) {
                conn_start_request(c, o, &pr, rr++, t);
                total_inflight++;
                if (conn_write(c, &pr) < 0) {
                    failed = true;
                    goto out;
                }
            }
        }
        while (sending && lat && t >= next_send) {
            struct conn *c = &cs[rr % o->conns];
            if (c->tx_active || c->inflight >= o->inflight) break; /* late: latency counts from next_send */
            conn_start_request(c, o, &pr, rr++, next_send);
            total_inflight++;
            next_send += interval;
            if (conn_write(c, &pr) < 0) {
                failed = true;
                goto out;
            }
        }
        /* Sleep until a response or the next scheduled send, with ns precision: a rounded-down ms timeout
         * would spin and take CPU from the broker on this 2-core machine. */
        int64_t wait_ns = 100000000;
        if (lat && sending) {
            wait_ns = next_send - now_ns();
            if (wait_ns < 0) wait_ns = 0;
        }
        struct timespec timeout = {wait_ns / 1000000000, wait_ns % 1000000000};
        for (int i = 0; i < o->conns; i++) {
            pfd[i].fd = cs[i].fd;
            pfd[i].events = (short)(POLLIN | (cs[i].tx_active ? POLLOUT : 0));
            pfd[i].revents = 0;
        }
        int n = ppoll(pfd, (nfds_t)o->conns, &timeout, NULL);
        if (n < 0 && errno != EINTR) die("poll: %s", strerror(errno));
        t = now_ns();
        for (int i = 0; n > 0 && i < o->conns; i++) {
            if (!pfd[i].revents) continue;
            struct conn *c = &cs[i];
            if ((pfd[i].revents & POLLOUT) && conn_write(c, &pr) < 0) {
                failed = true;
                goto out;
            }
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                int before = c->inflight;
                if (conn_read(c, &pr, &st, t, lat) < 0) {
                    fprintf(stderr, "replay: connection %d lost\n", i);
                    failed = true;
                    goto out;
                }
                total_inflight -= before - c->inflight;
                if (before != c->inflight) t_last = t;
            }
        }
    }
out:;
    double secs = (double)(t_last - t0) / 1e9;
    if (secs <= 0) secs = 1e-9;
    printf("{\"mode\": \"produce\", \"requests\": %" PRId64 ", \"failed\": %" PRId64 ", \"first_error\": %d, "
           "\"records\": %" PRId64 ", \"value_bytes\": %" PRId64 ", \"wire_bytes\": %" PRId64
           ", \"seconds\": %.4f, "
           "\"msgs_per_s\": %.1f, \"mb_per_s\": %.3f, \"records_per_batch\": %d, \"batch_wire_bytes\": %zu",
           st.requests_ok, st.requests_failed, st.first_error, st.records, st.value_bytes, st.wire_bytes,
           secs, (double)st.records / secs, (double)st.value_bytes / secs / 1e6, pr.records_per_batch,
           pr.batch_wire_bytes);
    if (lat) print_latency_json(&st);
    printf("}\n");
    return failed || st.requests_failed || st.requests_ok == 0 ? 1 : 0;
}

/* ---- Fetch ---- */

static int run_fetch(const struct opts *o)
{
    int fd = tcp_connect(o, false);
    if (fd < 0) return 2;
    int64_t *next = calloc((size_t)o->partitions, sizeof *next);
    int64_t *target = calloc((size_t)o->partitions, sizeof *target);
    for (int p = 0; p < o->partitions; p++)
        target[p] = -1;
    struct buf req = {0}, resp = {0};
    int64_t records = 0, bytes = 0, fetches = 0, t0 = now_ns(), last_progress = t0;
    int16_t first_error = 0;
    int32_t corr = 1;
    for (;;) {
        bool done = true;
        for (int p = 0; p < o->partitions; p++)
            if (target[p] < 0 || next[p] < target[p]) done = false;
        if (done) break;
        if (now_ns() - last_progress > 10LL * 1000000000LL) {
            fprintf(stderr, "replay: fetch made no progress for 10 s\n");
            first_error = first_error ? first_error : -1;
            break;
        }
        frame_start(&req, API_FETCH, 11, corr);
        put_i32(&req, -1);  /* replica id: a consumer */
        put_i32(&req, 100); /* max wait ms */
        put_i32(&req, 1);   /* min bytes */
        put_i32(&req, o->fetch_max_bytes);
        put_i8(&req, 0);   /* read uncommitted */
        put_i32(&req, 0);  /* session id */
        put_i32(&req, -1); /* session epoch: sessionless full fetch */
        put_i32(&req, 1);
        put_str(&req, o->topic);
        put_i32(&req, o->partitions);
        for (int p = 0; p < o->partitions; p++) {
            put_i32(&req, p);
            put_i32(&req, -1); /* current leader epoch: unknown */
            put_i64(&req, next[p]);
            put_i64(&req, -1); /* log start offset (followers only) */
            put_i32(&req, o->fetch_partition_bytes);
        }
        put_i32(&req, 0);  /* forgotten topics */
        put_str(&req, ""); /* rack id */
        frame_done(&req);
        if (roundtrip(fd, &req, &resp) < 0) die("%s", "fetch: connection lost");
        fetches++;
        struct rd r = {resp.p, resp.p + resp.len, false};
        if (rd_i32(&r) != corr++) die("%s", "fetch: correlation id mismatch");
        rd_i32(&r); /* throttle */
        int16_t top_err = rd_i16(&r);
        rd_i32(&r); /* session id */
        if (top_err) {
            fprintf(stderr, "replay: fetch: top-level error %d\n", top_err);
            exit(1);
        }
        int32_t nt = rd_count(&r, 6);
        for (int32_t t = 0; t < nt && !r.bad; t++) {
            rd_skip_str(&r);
            int32_t np = rd_count(&r, 42);
            for (int32_t k = 0; k < np && !r.bad; k++) {
                int32_t p = rd_i32(&r);
                int16_t err = rd_i16(&r);
                int64_t hw = rd_i64(&r);
                rd_i64(&r); /* last stable offset */
                rd_i64(&r); /* log start offset */
                int32_t na = rd_i32(&r);
                if (na > 0) rd_skip(&r, (int64_t)na * 16);
                rd_i32(&r); /* preferred read replica */
                int32_t rl = rd_i32(&r);
                if (rl < 0) rl = 0;
                if (!rd_need(&r, (size_t)rl)) break;
                const uint8_t *b = r.p, *bend = r.p + rl;
                r.p += rl;
                if (p < 0 || p >= o->partitions) die("%s", "fetch: partition out of range");
                if (err) {
                    if (!first_error) first_error = err;
                    continue;
                }
                if (target[p] < 0) target[p] = hw;
                /* Complete batches only; a trailing partial batch is fetched again from its start. */
                while (bend - b >= 61) {
                    int64_t blen = 12 + (int64_t)(int32_t)be32(b + 8);
                    if (blen < 61 || blen > bend - b) break;
                    int64_t base = (int64_t)be64(b);
                    int64_t last = base + (int32_t)be32(b + 23);
                    if (last >= next[p]) {
                        records += (int32_t)be32(b + 57);
                        bytes += blen;
                        next[p] = last + 1;
                        last_progress = now_ns();
                    }
                    b += blen;
                }
            }
        }
        if (r.bad) die("%s", "fetch: unparsable response");
        if (first_error) break;
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    printf("{\"mode\": \"fetch\", \"fetches\": %" PRId64 ", \"records\": %" PRId64
           ", \"wire_bytes\": %" PRId64 ", \"value_bytes\": %" PRId64
           ", \"seconds\": %.4f, \"msgs_per_s\": %.1f, \"mb_per_s\": %.3f, "
           "\"first_error\": %d}\n",
           fetches, records, bytes, records * o->record_bytes, secs, (double)records / secs,
           (double)records * o->record_bytes / secs / 1e6, first_error);
    close(fd);
    return first_error || records == 0 ? 1 : 0;
}

/* ---- Metadata, CreateTopics, probes ---- */

#define IO_ERROR (-1000) /* connection lost or unparsable response (Kafka's codes are >= -1) */

/* Metadata v8 for the topic. Returns the number of partitions that have a leader, IO_ERROR, or -1 when
 * none has one and *err holds the topic-level or first partition-level error code. */
static int metadata_ready(int fd, const struct opts *o, bool auto_create, int32_t corr, int16_t *err)
{
    struct buf req = {0}, resp = {0};
    frame_start(&req, API_METADATA, 8, corr);
    put_i32(&req, 1);
    put_str(&req, o->topic);
    put_i8(&req, auto_create);
    put_i8(&req, 0);
    put_i8(&req, 0);
    frame_done(&req);
    int rc = IO_ERROR;
    *err = 0;
    if (roundtrip(fd, &req, &resp) < 0) goto out;
    struct rd r = {resp.p, resp.p + resp.len, false};
    rd_i32(&r); /* correlation id */
    rd_i32(&r); /* throttle */
    int32_t nb = rd_count(&r, 12);
    for (int32_t i = 0; i < nb && !r.bad; i++) {
        rd_i32(&r);
        rd_skip_str(&r);
        rd_i32(&r);
        rd_skip_str(&r);
    }
    rd_skip_str(&r); /* cluster id */
    rd_i32(&r);      /* controller id */
    int32_t nt = rd_count(&r, 13);
    int ready = 0;
    for (int32_t t = 0; t < nt && !r.bad; t++) {
        int16_t terr = rd_i16(&r);
        rd_skip_str(&r);
        rd_i8(&r);
        int32_t np = rd_count(&r, 26);
        for (int32_t k = 0; k < np && !r.bad; k++) {
            int16_t perr = rd_i16(&r);
            rd_i32(&r);
            int32_t leader = rd_i32(&r);
            rd_i32(&r); /* leader epoch */
            for (int a = 0; a < 3; a++)
                rd_skip(&r, (int64_t)rd_count(&r, 4) * 4);
            if (!perr && leader >= 0) ready++;
            if (perr && !*err) *err = perr;
        }
        rd_i32(&r); /* topic authorized operations */
        if (terr) *err = terr;
    }
    if (!r.bad) rc = *err && !ready ? -1 : ready;
out:
    free(req.p);
    free(resp.p);
    return rc;
}

/* One single-record produce to `partition`, acks=-1. Returns the partition error code (0 = acknowledged) or
 * IO_ERROR. */
static int produce_probe(int fd, const struct opts *o, int32_t partition, int32_t corr)
{
    struct buf batch = {0}, req = {0}, resp = {0};
    build_batch(&batch, 1, 16, 0, wall_ms());
    frame_start(&req, API_PRODUCE, 7, corr);
    put_i16(&req, -1);
    put_i16(&req, -1);
    put_i32(&req, 30000);
    put_i32(&req, 1);
    put_str(&req, o->topic);
    put_i32(&req, 1);
    put_i32(&req, partition);
    put_i32(&req, (int32_t)batch.len);
    put_raw(&req, batch.p, batch.len);
    frame_done(&req);
    int rc = IO_ERROR;
    if (roundtrip(fd, &req, &resp) == 0) {
        struct rd r = {resp.p, resp.p + resp.len, false};
        rd_i32(&r);
        struct produce_result res = {0};
        produce_resp_parse(&r, &res);
        if (!r.bad && res.partitions_ok + res.partitions_failed == 1)
            rc = res.partitions_ok ? 0 : res.first_error;
    }
    free(batch.p);
    free(req.p);
    free(resp.p);
    return rc;
}

static int run_create(const struct opts *o)
{
    int fd = tcp_connect(o, false);
    if (fd < 0) return 2;
    int64_t t0 = now_ns();
    struct buf req = {0}, resp = {0};
    frame_start(&req, API_CREATE_TOPICS, 4, 1);
    put_i32(&req, 1);
    put_str(&req, o->topic);
    put_i32(&req, o->partitions);
    put_i16(&req, 1);
    put_i32(&req, 0); /* assignments */
    put_i32(&req, o->nconfigs);
    for (int i = 0; i < o->nconfigs; i++) {
        char key[128];
        const char *eq = strchr(o->configs[i], '=');
        if (!eq || eq - o->configs[i] >= (long)sizeof key) die("bad --config %s (key=value)", o->configs[i]);
        memcpy(key, o->configs[i], (size_t)(eq - o->configs[i]));
        key[eq - o->configs[i]] = 0;
        put_str(&req, key);
        put_str(&req, eq + 1);
    }
    put_i32(&req, o->timeout_ms);
    put_i8(&req, 0);
    frame_done(&req);
    if (roundtrip(fd, &req, &resp) < 0) die("%s", "create: connection lost");
    struct rd r = {resp.p, resp.p + resp.len, false};
    rd_i32(&r);
    rd_i32(&r);
    int16_t err = -1;
    if (rd_count(&r, 6) == 1) {
        rd_skip_str(&r);
        err = rd_i16(&r);
    }
    if (r.bad || err) {
        printf("{\"mode\": \"create\", \"error_code\": %d}\n", err);
        return 1;
    }
    /* Leaders everywhere, then one acknowledged produce per partition (Kafka may refuse briefly). */
    int32_t corr = 2;
    int16_t merr = 0;
    int64_t deadline = now_ns() + (int64_t)o->timeout_ms * 1000000LL;
    while (metadata_ready(fd, o, false, corr++, &merr) < o->partitions) {
        if (now_ns() > deadline) die("%s", "create: partitions have no leader in time");
        usleep(20000);
    }
    for (int32_t p = 0; p < o->partitions; p++) {
        int rc;
        while ((rc = produce_probe(fd, o, p, corr++)) != 0) {
            if (rc == IO_ERROR || now_ns() > deadline) die("%s", "create: probe produce failed");
            usleep(20000);
        }
    }
    printf("{\"mode\": \"create\", \"error_code\": 0, \"seconds\": %.3f}\n", (double)(now_ns() - t0) / 1e9);
    close(fd);
    free(req.p);
    free(resp.p);
    return 0;
}

static int run_idle(const struct opts *o)
{
    int *fds = calloc((size_t)o->conns, sizeof *fds);
    struct buf req = {0}, resp = {0};
    frame_start(&req, API_API_VERSIONS, 0, 1);
    frame_done(&req);
    for (int i = 0; i < o->conns; i++) {
        fds[i] = tcp_connect(o, false);
        if (fds[i] < 0 || roundtrip(fds[i], &req, &resp) < 0) {
            printf("{\"mode\": \"idle\", \"connected\": %d, \"error_code\": 1}\n", i);
            return 1;
        }
    }
    printf("{\"mode\": \"idle\", \"connected\": %d, \"error_code\": 0}\n", o->conns);
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    int alive = 0;
    for (int i = 0; i < o->conns; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        if (poll(&p, 1, 0) == 0) alive++; /* nothing to read (no EOF): still open */
        close(fds[i]);
    }
    fprintf(stderr, "replay: idle: %d of %d connections still open at the end\n", alive, o->conns);
    return alive == o->conns ? 0 : 1;
}

/* Process start time of `pid` in CLOCK_BOOTTIME ns (field 22 of /proc/PID/stat, clock ticks). */
static int64_t pid_start_boottime_ns(int pid)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    char *s = strrchr(line, ')');
    if (!s) return -1;
    s += 2; /* field 3 */
    for (int field = 3; field < 22 && s; field++) {
        s = strchr(s, ' ');
        if (s) s++;
    }
    if (!s) return -1;
    long long ticks = atoll(s);
    return ticks * (1000000000LL / sysconf(_SC_CLK_TCK));
}

static int run_first_produce(const struct opts *o_in)
{
    struct opts o = *o_in;
    int64_t t0;
    if (o.pid > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        int64_t boot_now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        int64_t start = pid_start_boottime_ns(o.pid);
        if (start < 0) die("%s", "first-produce: no such pid");
        t0 = now_ns() - (boot_now - start);
    } else {
        t0 = o.since_ns;
    }
    int64_t deadline = now_ns() + (int64_t)o.timeout_ms * 1000000LL;
    while (o.listener_file && !o.port) { /* wait for the broker to write its bound address */
        FILE *f = fopen(o.listener_file, "r");
        char line[128] = {0};
        if (f) {
            if (fgets(line, sizeof line, f) && strchr(line, ':')) {
                line[strcspn(line, "\r\n")] = 0;
                set_bootstrap(&o, line);
            }
            fclose(f);
        }
        if (!o.port) {
            if (now_ns() > deadline) die("%s", "first-produce: no listener file in time");
            usleep(500);
        }
    }
    int attempts = 0, fd = -1;
    int32_t corr = 1;
    for (;;) {
        if (now_ns() > deadline) die("%s", "first-produce: no acknowledged produce in time");
        attempts++;
        if (fd < 0) fd = tcp_connect(&o, true);
        if (fd < 0) {
            usleep(1000);
            continue;
        }
        int16_t err;
        int ready = metadata_ready(fd, &o, true, corr++, &err);
        int rc = ready >= 1 ? produce_probe(fd, &o, 0, corr++) : ready;
        if (rc == 0) break;
        if (rc == IO_ERROR) {
            close(fd);
            fd = -1;
        }
        usleep(1000);
    }
    double ms = (double)(now_ns() - t0) / 1e6;
    printf("{\"mode\": \"first-produce\", \"ms\": %.2f, \"attempts\": %d}\n", ms, attempts);
    close(fd);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: replay MODE [options]\n"
            "  MODE: produce | fetch | create | idle | first-produce\n"
            "  --bootstrap H:P      broker address (IPv4 literal)\n"
            "  --topic T  --partitions N (1)  --config k=v (create, repeatable)\n"
            "  --partition-ids a,b,... (produce: these partitions; default 0..N-1)\n"
            "  --record-bytes N (100)  --batch-bytes N (65536)  --batch-records N  --codec none|zstd\n"
            "  --acks 1|-1 (1)  --conns N (4)  --inflight N (4)  --seconds S (3)  --rate REQ_PER_S (0)\n"
            "  --requests N         stop after N requests (with --seconds as a time limit)\n"
            "  --round-robin        one partition per request (default: all partitions per request)\n"
            "  --fetch-partition-bytes N (1048576)  --fetch-max-bytes N (52428800)\n"
            "  --since-ns NS | --pid PID  --listener-file F (first-produce)  --timeout-ms N (30000)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct opts o = {.partitions = 1,
                     .record_bytes = 100,
                     .batch_bytes = 65536,
                     .acks = 1,
                     .conns = 4,
                     .inflight = 4,
                     .seconds = 3,
                     .fetch_partition_bytes = 1048576,
                     .fetch_max_bytes = 52428800,
                     .timeout_ms = 30000};
    if (argc < 2) usage();
    o.mode = argv[1];
    const char *ids = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && ++i)
        if (ARG("--bootstrap"))
            set_bootstrap(&o, v);
        else if (ARG("--topic"))
            o.topic = v;
        else if (ARG("--partitions"))
            o.partitions = atoi(v);
        else if (ARG("--partition-ids"))
            ids = v;
        else if (ARG("--record-bytes"))
            o.record_bytes = atoi(v);
        else if (ARG("--batch-bytes"))
            o.batch_bytes = atoi(v);
        else if (ARG("--batch-records"))
            o.batch_records = atoi(v);
        else if (ARG("--acks"))
            o.acks = strcmp(v, "all") == 0 ? -1 : atoi(v);
        else if (ARG("--codec"))
            o.codec = strcmp(v, "zstd") == 0 ? 4 : strcmp(v, "none") == 0 ? 0 : -1;
        else if (ARG("--conns"))
            o.conns = atoi(v);
        else if (ARG("--inflight"))
            o.inflight = atoi(v);
        else if (ARG("--seconds"))
            o.seconds = atof(v);
        else if (ARG("--rate"))
            o.rate = atof(v);
        else if (ARG("--requests"))
            o.requests = atoll(v);
        else if (ARG("--fetch-partition-bytes"))
            o.fetch_partition_bytes = atoi(v);
        else if (ARG("--fetch-max-bytes"))
            o.fetch_max_bytes = atoi(v);
        else if (ARG("--config") && o.nconfigs < 32)
            o.configs[o.nconfigs++] = v;
        else if (ARG("--since-ns"))
            o.since_ns = atoll(v);
        else if (ARG("--pid"))
            o.pid = atoi(v);
        else if (ARG("--listener-file"))
            o.listener_file = v;
        else if (ARG("--timeout-ms"))
            o.timeout_ms = atoi(v);
        else if (strcmp(a, "--round-robin") == 0)
            o.round_robin = true;
        else
            usage();
#undef ARG
    }
    if (o.codec < 0) die("%s", "--codec none|zstd");
    if (o.record_bytes < 8) die("%s", "--record-bytes >= 8");
    if (o.partitions < 1) die("%s", "--partitions >= 1");
    size_t id_cap = (size_t)o.partitions + (ids ? strlen(ids) / 2 + 1 : 0);
    if (!(o.partition_ids = calloc(id_cap, sizeof *o.partition_ids))) die("%s", "out of memory");
    if (ids) { /* a leader's share of a cluster's partitions (bench/cluster.py) */
        o.partitions = 0;
        for (const char *c = ids; *c;) {
            char *end;
            long id = strtol(c, &end, 10);
            if (end == c || id < 0 || id > INT32_MAX || (size_t)o.partitions == id_cap ||
                (*end && *end != ','))
                die("%s", "--partition-ids: a comma-separated list of partition indexes");
            o.partition_ids[o.partitions++] = (int)id;
            c = *end == ',' ? end + 1 : end;
        }
        if (o.partitions < 1) die("%s", "--partition-ids: at least one");
    } else {
        for (int p = 0; p < o.partitions; p++)
            o.partition_ids[p] = p;
    }
    if (strcmp(o.mode, "first-produce") == 0) {
        if (!o.topic) usage();
        if (!o.port && !o.listener_file) usage();
        return run_first_produce(&o);
    }
    if (!o.port) usage();
    if (strcmp(o.mode, "idle") == 0) return run_idle(&o);
    if (!o.topic || strlen(o.topic) > TOPIC_NAME_BYTES_MAX) usage();
    if (strcmp(o.mode, "produce") == 0) return run_produce(&o);
    if (strcmp(o.mode, "fetch") == 0) return run_fetch(&o);
    if (strcmp(o.mode, "create") == 0) return run_create(&o);
    usage();
    return 2;
}
