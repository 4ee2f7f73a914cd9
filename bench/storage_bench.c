/*
 * storage_bench.c: throughput of the segment store (storage/) against the plain system calls it wraps,
 * measured in the same run on the same disk, so the ratios are what matters (absolute numbers depend on
 * the machine). Not a test: it asserts nothing, it prints a table.
 *
 *   append, no flush      gr_log_append of N identical batches (page cache only), vs a sequential
 *                         write(2) loop of the same bytes to a plain file in the same directory
 *   append, group commit  the same with gr_log_flush_async after every append (acks=-1 style): the
 *                         flusher threads coalesce; the clock stops when everything is durable; the
 *                         number of fdatasync rounds is reported
 *   read, sendfile        gr_log_read slices (1 MiB) of the whole log sent with sendfile(2) to a loopback
 *                         TCP socket drained by a thread, vs the same slices pread into a buffer and sent
 *                         with writev(2); both from the page cache (the log was just written)
 *   group commit policy   N files (1, 10, 100, 1000) each get a 4 KiB append, then are made durable either
 *                         by fdatasync of every file on 2 threads (Gregor's flusher threads) or by one
 *                         syncfs(2) of the file system; rounds alternate between the two, medians printed
 *
 * Usage: storage_bench [dir (default /tmp)] [MiB per run (default 256)] [sync (only the policy table)]
 * Read next: storage/log.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "protocol/record_batch.h"
#include "storage/log.h"
#include "storage/store.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A valid uncompressed batch of exactly `target` bytes (one record, value sized to fit). */
static uint8_t *make_batch(size_t target, size_t *len)
{
    size_t value = target > 80 ? target - 70 : 8;
    for (int attempt = 0; attempt < 64; attempt++) {
        uint8_t *v = malloc(value);
        memset(v, 'b', value);
        struct gr_record_in rec = {
            .timestamp = 1700000000000, .key = {NULL, -1}, .value = {v, (int32_t)value}};
        struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                     .codec = GR_CODEC_NONE,
                                     .log_append_time = -1,
                                     .producer_id = -1,
                                     .producer_epoch = -1,
                                     .base_sequence = -1};
        uint8_t *out;
        if (gr_batch_build(&bp, &rec, 1, &out, len) != 0) abort();
        free(v);
        if (*len == target) return out;
        value += target > *len ? target - *len : 0;
        value -= *len > target ? *len - target : 0;
        free(out);
    }
    abort();
}

static atomic_long flush_rounds;
static atomic_llong durable_seen;

static void on_flushed(void *ctx, struct gr_log *log, int64_t durable, int err)
{
    (void)ctx;
    (void)log;
    if (err) fprintf(stderr, "flush error %d\n", err);
    atomic_fetch_add(&flush_rounds, 1);
    long long prev = atomic_load(&durable_seen);
    while (durable > prev && !atomic_compare_exchange_weak(&durable_seen, &prev, durable))
        ;
}

static void rm_rf(const char *path)
{
    char cmd[700];
    if (strchr(path, '\'')) { /* main refuses such a base directory; never quote around it */
        fprintf(stderr, "cleanup of %s skipped: a quote in the path\n", path);
        return;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", path);
}

static double plain_write_loop(const char *dir, const uint8_t *batch, size_t len, long n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/plain.bin", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        if (write(fd, batch, len) != (ssize_t)len) {
            perror("write");
            exit(1);
        }
    }
    double t = now_s() - t0;
    close(fd);
    unlink(path);
    return (double)n * (double)len / t;
}

struct store_run {
    struct gr_store *store;
    struct gr_log *log;
};

static void open_store(const char *dir, struct store_run *r)
{
    struct gr_store_config cfg;
    gr_store_config_defaults(&cfg);
    cfg.log_dir = dir;
    cfg.on_flushed = on_flushed;
    cfg.max_message_bytes = 1 << 20;
    if (gr_store_open(&cfg, &r->store) != 0) exit(1);
    struct gr_topic *t;
    if (gr_store_topic_create(r->store, "bench", 1, NULL, NULL, 0, &t) != 0) exit(1);
    r->log = gr_topic_log(t, 0);
}

static double append_run(const char *dir, uint8_t *batch, size_t len, long n, bool group_commit, long *rounds)
{
    struct store_run r;
    open_store(dir, &r);
    atomic_store(&flush_rounds, 0);
    atomic_store(&durable_seen, 0);
    struct gr_append_result res;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        if (gr_log_append(r.log, batch, len, -1, &res) != 0) {
            fprintf(stderr, "append failed\n");
            exit(1);
        }
        if (group_commit) gr_log_flush_async(r.log);
    }
    if (group_commit) {
        while (atomic_load(&durable_seen) < n) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    double t = now_s() - t0;
    *rounds = atomic_load(&flush_rounds);
    gr_store_close(r.store);
    return (double)n * (double)len / t;
}

struct drain {
    int fd;
    long long bytes;
};

static void *drain_main(void *p)
{
    struct drain *d = p;
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    for (;;) {
        ssize_t r = read(d->fd, buf, cap);
        if (r <= 0) break;
        d->bytes += r;
    }
    free(buf);
    return NULL;
}

/* A connected loopback TCP pair: *tx sends, the drain thread reads rx. */
static void tcp_pair(int *tx, int *rx)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &al)) {
        perror("listen");
        exit(1);
    }
    *tx = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(*tx, (struct sockaddr *)&a, sizeof(a))) {
        perror("connect");
        exit(1);
    }
    *rx = accept(ls, NULL, NULL);
    close(ls);
    int one = 1;
    setsockopt(*tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static double read_run(struct gr_log *log, bool use_sendfile)
{
    int tx, rx;
    tcp_pair(&tx, &rx);
    struct drain d = {.fd = rx};
    pthread_t th;
    pthread_create(&th, NULL, drain_main, &d);
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    long long sent = 0;
    double t0 = now_s();
    int64_t off = gr_log_start_offset(log), end = gr_log_end_offset(log);
    while (off < end) {
        struct gr_log_slice s;
        if (gr_log_read(log, off, (int64_t)cap, end, true, &s) != 0 || s.bytes == 0) break;
        if (use_sendfile) {
            off_t pos = s.file_pos;
            int64_t left = s.bytes;
            while (left > 0) {
                ssize_t n = sendfile(tx, s.fd, &pos, (size_t)left);
                if (n <= 0) {
                    perror("sendfile");
                    exit(1);
                }
                left -= n;
            }
        } else {
            if (pread(s.fd, buf, (size_t)s.bytes, s.file_pos) != s.bytes) {
                perror("pread");
                exit(1);
            }
            /* A response header and the records, as a fetch response would go out. */
            char header[64] = {0};
            struct iovec iov[2] = {{header, sizeof(header)}, {buf, (size_t)s.bytes}};
            size_t total = sizeof(header) + (size_t)s.bytes, done = 0;
            while (done < total) {
                ssize_t n = writev(tx, iov, 2);
                if (n <= 0) {
                    perror("writev");
                    exit(1);
                }
                done += (size_t)n;
                for (int k = 0; k < 2 && n > 0; k++) {
                    size_t take = (size_t)n < iov[k].iov_len ? (size_t)n : iov[k].iov_len;
                    iov[k].iov_base = (char *)iov[k].iov_base + take;
                    iov[k].iov_len -= take;
                    n -= (ssize_t)take;
                }
            }
        }
        sent += s.bytes;
        /* Next call starts after the last whole batch of this slice. */
        uint8_t hdr[GR_BATCH_HEADER_BYTES];
        int64_t p = s.file_pos, stop = s.file_pos + s.bytes, last = off;
        while (p < stop) {
            if (pread(s.fd, hdr, sizeof(hdr), p) != (ssize_t)sizeof(hdr)) break;
            last = gr_batch_last_offset(hdr);
            p += gr_batch_total_bytes(hdr);
        }
        off = last + 1;
        gr_log_slice_release(&s);
    }
    shutdown(tx, SHUT_WR);
    pthread_join(th, NULL);
    double t = now_s() - t0;
    close(tx);
    close(rx);
    free(buf);
    return (double)sent / t;
}

/* ---- group commit policy: per-file fdatasync on flusher threads vs one syncfs ---- */

struct sync_slice {
    int *fds;
    int from, to;
};

static void *fdatasync_main(void *p)
{
    struct sync_slice *s = p;
    for (int i = s->from; i < s->to; i++)
        if (fdatasync(s->fds[i]) != 0) perror("fdatasync");
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void sync_policy(const char *dir)
{
    printf("\n%-10s %8s %22s %22s %8s\n", "dirty", "rounds", "fdatasync x N, 2 thr", "syncfs", "ratio");
    static const int counts[] = {1, 10, 100, 1000};
    static char page[4096];
    memset(page, 'g', sizeof(page));
    for (int ci = 0; ci < 4; ci++) {
        int n = counts[ci], rounds = n >= 1000 ? 8 : 20;
        char sub[600];
        snprintf(sub, sizeof(sub), "%s/sync-%d", dir, n);
        mkdir(sub, 0755);
        int dfd = open(sub, O_RDONLY | O_DIRECTORY);
        int *fds = calloc((size_t)n, sizeof(int));
        for (int i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof(name), "%d.log", i);
            fds[i] = openat(dfd, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
        }
        syncfs(dfd);
        double *tf = calloc((size_t)rounds, sizeof(double)), *ts = calloc((size_t)rounds, sizeof(double));
        for (int r = 0; r < 2 * rounds; r++) {
            for (int i = 0; i < n; i++)
                if (pwrite(fds[i], page, sizeof(page), (off_t)r * (off_t)sizeof(page)) < 0) perror("pwrite");
            double t0 = now_s();
            if (r % 2 == 0) {
                pthread_t th[2];
                struct sync_slice sl[2] = {{fds, 0, n / 2}, {fds, n / 2, n}};
                for (int k = 0; k < 2; k++)
                    pthread_create(&th[k], NULL, fdatasync_main, &sl[k]);
                for (int k = 0; k < 2; k++)
                    pthread_join(th[k], NULL);
                tf[r / 2] = now_s() - t0;
            } else {
                if (syncfs(dfd) != 0) perror("syncfs");
                ts[r / 2] = now_s() - t0;
            }
        }
        qsort(tf, (size_t)rounds, sizeof(double), cmp_double);
        qsort(ts, (size_t)rounds, sizeof(double), cmp_double);
        double mf = tf[rounds / 2] * 1e3, ms = ts[rounds / 2] * 1e3;
        char a[32], b[32];
        snprintf(a, sizeof(a), "%.2f ms", mf);
        snprintf(b, sizeof(b), "%.2f ms", ms);
        printf("%-10d %8d %22s %22s %8.2f\n", n, rounds, a, b, ms / mf);
        for (int i = 0; i < n; i++)
            close(fds[i]);
        close(dfd);
        free(fds);
        free(tf);
        free(ts);
        rm_rf(sub);
    }
    printf("(median time to make one round of N dirty files durable; ratio = syncfs / fdatasync)\n");
}

int main(int argc, char **argv)
{
    const char *base = argc > 1 ? argv[1] : "/tmp";
    long mib = argc > 2 ? atol(argv[2]) : 256;
    struct stat st;
    if (argc > 4 || base[0] == '-' || strchr(base, '\'') || stat(base, &st) != 0 || !S_ISDIR(st.st_mode) ||
        mib < 1 || (argc > 3 && strcmp(argv[3], "sync") != 0)) {
        fprintf(stderr,
                "usage: storage_bench [BASE_DIR [MIB [sync]]]\n"
                "  BASE_DIR: an existing directory (default /tmp) where a scratch directory is made and "
                "removed\n  MIB: MiB written per case (default 256)\n"
                "  sync: compare syncfs with per-file fdatasync instead\n");
        return 2;
    }
    gr_log_set_level(GR_LOG_WARN);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/gr-storage-bench-%d", base, (int)getpid());
    rm_rf(dir);
    if (mkdir(dir, 0755) != 0) {
        perror("mkdir");
        return 1;
    }
    if (argc > 3 && strcmp(argv[3], "sync") == 0) {
        sync_policy(dir);
        rm_rf(dir);
        return 0;
    }
    printf("storage_bench: %ld MiB per run in %s\n", mib, dir);
    printf("%-34s %10s %10s %8s %s\n", "case", "MB/s", "write(2)", "ratio", "notes");
    size_t sizes[] = {1024, 16384};
    for (int si = 0; si < 2; si++) {
        size_t len;
        uint8_t *batch = make_batch(sizes[si], &len);
        long n = mib * 1024 * 1024 / (long)len;
        double plain = plain_write_loop(dir, batch, len, n);
        char sub[600];
        for (int gc = 0; gc < 2; gc++) {
            snprintf(sub, sizeof(sub), "%s/s%zu-%d", dir, len, gc);
            long rounds = 0;
            double ours = append_run(sub, batch, len, n, gc == 1, &rounds);
            double plain2 = plain_write_loop(dir, batch, len, n); /* again, to see the noise */
            double p = (plain + plain2) / 2;
            char notes[96] = "";
            if (gc) snprintf(notes, sizeof(notes), "%ld fdatasync rounds for %ld appends", rounds, n);
            char name[64];
            snprintf(name, sizeof(name), "append %zu B batches, %s", len, gc ? "group commit" : "no flush");
            printf("%-34s %10.0f %10.0f %8.2f %s\n", name, ours / 1e6, p / 1e6, ours / p, notes);
            if (!(si == 1 && gc == 0)) rm_rf(sub);
        }
        free(batch);
    }
    /* Reads from the 16 KiB no-flush log just written (page cache). */
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/s16384-0", dir);
    struct gr_store_config cfg;
    gr_store_config_defaults(&cfg);
    cfg.log_dir = sub;
    struct gr_store *store;
    if (gr_store_open(&cfg, &store) == 0) {
        struct gr_log *log = gr_topic_log(gr_store_topic_find(store, "bench", 5), 0);
        double w1 = read_run(log, false), s1 = read_run(log, true);
        double w2 = read_run(log, false), s2 = read_run(log, true);
        double w = (w1 + w2) / 2, s = (s1 + s2) / 2;
        printf("%-34s %10.0f %10s %8s\n", "read 16 KiB batches, pread+writev", w / 1e6, "-", "1.00");
        printf("%-34s %10.0f %10s %8.2f %s\n", "read 16 KiB batches, sendfile", s / 1e6, "-", s / w,
               "ratio to pread+writev; loopback TCP");
        gr_store_close(store);
    }
    sync_policy(dir);
    rm_rf(dir);
    return 0;
}
