/*
 * main.c: the gregor binary. `gregor [server.properties] [--override key=value ...]` like Kafka's start
 * script, plus --version, --help and --healthcheck (sends ApiVersions to the configured listener; exit 0
 * if answered). SIGTERM/SIGINT stop it cleanly: connections closed, logs flushed and checkpointed; in
 * cluster mode after the controlled shutdown (server/membership.c gr_membership_shutdown_begin: the broker
 * keeps serving until the controller moved its leaderships, at most 30 s; a second signal ends that wait).
 * Read next: server/broker.h.
 */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/failpoint.h"
#include "common/log.h"
#include "common/time.h"
#include "cluster/features.h"
#include "cluster/local.h"
#include "cluster/topic_writer.h"
#include "server/acls.h"
#include "server/admin_http.h"
#include "server/broker.h"
#include "server/dynconf.h"
#include "server/fetch_session.h"
#include "server/scram_store.h"
#include "server/security_etcd.h"
#include "storage/cleaner.h"
#include "server/groups.h"
#include "server/txns.h"
#include "server/producer_ids.h"
#include "server/handlers/handlers.h"
#include "coordinator/offsets_log.h"
#include "storage/sys.h"

#ifndef GREGOR_VERSION
#define GREGOR_VERSION "0.1.0"
#endif

void gr_broker_on_flushed(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err);
void gr_broker_init_watchers(struct gr_broker *b);
void gr_broker_on_io_done(void *ctx);
int gr_healthcheck(struct gr_config *cfg);

static void usage(FILE *f)
{
    fprintf(f, "usage: gregor [server.properties] [--override key=value ...]\n"
               "       gregor --version | --help | --healthcheck [server.properties] [--override ...]\n"
               "Configuration keys use Apache Kafka's names (listeners, log.dirs, num.partitions, ...).\n");
}

/* SIGTERM / SIGINT: the loop ends at once, or, in cluster mode, after the controlled shutdown's wait
 * (gr_membership_shutdown_begin, which breaks the loop itself); a second signal during that wait ends it at
 * once. */
static void stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)revents;
    struct gr_broker *b = w->data;
    if (b->ctl_shutdown.waiting) {
        GR_INFO("signal %d during the controlled shutdown: stopping at once", w->signum);
    } else {
        GR_INFO("signal %d: shutting down", w->signum);
        if (!b->stopping && gr_membership_shutdown_begin(b)) return;
    }
    b->ctl_shutdown.waiting = false;
    b->stopping = true;
    ev_break(loop, EVBREAK_ALL);
}

/* Drops the idempotence state of producers silent for producer.id.expiration.ms, on every partition. */
static void expire_producers(struct gr_broker *b)
{
    int64_t now = gr_time_wall_ms(), expiration = b->cfg.settings.producer_id_expiration_ms;
    for (int i = 0; i < gr_store_topic_count(b->store); i++) {
        struct gr_topic *t = gr_store_topic_at(b->store, i);
        for (int32_t p = 0; p < gr_topic_partition_count(t); p++)
            if (gr_topic_log(t, p)) gr_log_expire_producers(gr_topic_log(t, p), now, expiration);
    }
}

/* Raises the soft RLIMIT_NOFILE to the hard limit. Called before the store opens: loading many partitions
   under a soft limit of 1024 ran out of descriptors and took partitions offline. */
static void raise_open_files_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        GR_WARN("open files: raising RLIMIT_NOFILE failed: %s", strerror(errno));
}

/* Says whether the descriptors the broker may hold fit RLIMIT_NOFILE (raised by raise_open_files_limit):
   gregor.open.files.max segment files; per partition its directory and the next segment's file made
   ahead of a roll; the active files of __consumer_offsets (outside the cap: offsets.topic.num.partitions,
   counted even before the topic exists; and __transaction_state's, transaction.state.log.num.partitions, the
   same); max.connections sockets; and a reserve for the rest
   (listeners, checkpoints, the I/O pool's and flushers' short-lived files). */
#define OPEN_FILES_RESERVE 64
static void check_open_files(struct gr_broker *b, int64_t partitions)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    int64_t segs = gr_config_int(&b->cfg, "gregor.open.files.max");
    int64_t conns = gr_config_int(&b->cfg, "max.connections");
    int64_t kept = gr_config_int(&b->cfg, "offsets.topic.num.partitions");
    kept += b->cfg.settings.transaction_state_log_num_partitions; /* the same */
    int64_t limit = rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : (int64_t)rl.rlim_cur;
    int64_t fixed = segs + 2 * partitions + kept + OPEN_FILES_RESERVE;
    if (fixed > limit)
        GR_WARN(
            "open files: gregor.open.files.max (%" PRId64 ") + 2 x %" PRId64 " partitions + %" PRId64
            " __consumer_offsets and __transaction_state files + %d reserved exceed RLIMIT_NOFILE (%" PRId64
            "): opens may fail with "
            "EMFILE; lower gregor.open.files.max or raise the limit",
            segs, partitions, kept, OPEN_FILES_RESERVE, limit);
    else if (conns == INT32_MAX) /* Kafka's default, no limit: say how many fit, no warning */
        GR_INFO("open files: RLIMIT_NOFILE %" PRId64 ", gregor.open.files.max %" PRId64 ", room for %" PRId64
                " connections",
                limit, segs, limit - fixed);
    else if (conns > limit - fixed)
        GR_WARN("open files: RLIMIT_NOFILE %" PRId64 " leaves room for %" PRId64 " connections beside "
                "gregor.open.files.max (%" PRId64 "), 2 x %" PRId64 " partitions and %" PRId64
                " __consumer_offsets and __transaction_state files; max.connections is %" PRId64,
                limit, limit - fixed, segs, partitions, kept, conns);
    else
        GR_INFO("open files: RLIMIT_NOFILE %" PRId64 ", gregor.open.files.max %" PRId64, limit, segs);
}

static void housekeeping_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker *b = w->data;
    int64_t now = gr_time_mono_ms();
    gr_net_close_idle(b, now);
    gr_log_ratelimit_flush(now); /* counts of rate-limited warnings whose window ended */
    gr_net_housekeeping(b, now);
    gr_store_fds_trim(b->store); /* files pinned by flushes or reads earlier may be closable now */
    if (now - b->last_retention_ms >= b->cfg.settings.log_retention_check_interval_ms) {
        b->last_retention_ms = now;
        gr_store_retention_run(b->store, gr_time_wall_ms());
    }
    if (now - b->last_producer_expiry_ms >= b->cfg.settings.producer_id_expiration_check_interval_ms) {
        b->last_producer_expiry_ms = now;
        expire_producers(b);
    }
    gr_store_cleaner_tick(b->store, gr_time_wall_ms(), NULL); /* compaction: installs / hands out work */
    /* checkpoints every log.flush.offset.checkpoint.interval.ms (Kafka's default, 60 s) */
    if (now - b->last_checkpoint_ms >= 60000) {
        b->last_checkpoint_ms = now;
        gr_store_checkpoint(b->store);
    }
}

/* Takes an exclusive lock on <log dir>/.lock (Kafka's guard against two brokers on one directory).
 * Returns the descriptor (kept open for the process's life) or -1 after logging why. */
/* GREGOR_NET_THREAD_AUDIT=1: one WARN line per call that may wait for the disk made on the network thread
   after start (storage/sys.h gr_sys_audit_this_thread); =/absolute/path: the same lines are also appended
   to that file (compat-tests/run.sh collects them from every broker a suite starts). Tests assert there
   are none. */
static int audit_fd = -1;

static void net_thread_audit_report(const char *op, int fd, const char *path)
{
    char proc[64], where[512] = "?", line[1200];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = fd >= 0 ? readlink(proc, where, sizeof where - 1) : -1;
    where[n > 0 ? n : 0] = 0;
    GR_WARN("net-thread disk call: %s %s%s%s", op, n > 0 ? where : "", path ? "/" : "", path ? path : "");
    if (audit_fd >= 0) {
        int len = snprintf(line, sizeof line, "%d %s %s%s%s\n", (int)getpid(), op, n > 0 ? where : "",
                           path ? "/" : "", path ? path : "");
        if (len > 0 && write(audit_fd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1) < 0) {
            /* best effort: the WARN line above was logged */
        }
    }
}

static int lock_log_dir(const char *dir)
{
    char parents[4096];
    snprintf(parents, sizeof parents, "%s", dir);
    for (char *p = parents + 1; *p; p++) { /* mkdir -p */
        if (*p != '/') continue;
        *p = 0;
        mkdir(parents, 0755);
        *p = '/';
    }
    if (mkdir(dir, 0755) && errno != EEXIST) {
        GR_ERROR("cannot create log directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
        GR_ERROR("log directory %s is in use by another process (%s): only one broker may use it", dir,
                 fd < 0 ? strerror(errno) : "locked");
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static int parse_args(int argc, char **argv, struct gr_config *cfg, int *mode)
{
    *mode = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--version"))
            *mode = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            *mode = 2;
        else if (!strcmp(a, "--healthcheck"))
            *mode = 3;
        else if (!strcmp(a, "--override")) {
            if (++i >= argc) {
                fprintf(stderr, "--override needs key=value\n");
                return -1;
            }
            if (gr_config_set_kv(cfg, argv[i]) < 0) return -1;
        } else if (!strncmp(a, "--override=", 11)) {
            if (gr_config_set_kv(cfg, a + 11) < 0) return -1;
        } else if (a[0] == '-') {
            fprintf(stderr, "unknown option %s\n", a);
            usage(stderr);
            return -1;
        } else if (gr_config_load_file(cfg, a) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Exits `status` before the broker ran, after freeing what was made so far, so that the sanitizer build's
 * leak check (which exits 1 on a leak) keeps the status. */
static int exit_early(struct gr_broker *b, int status)
{
    if (b->iopool) gr_iopool_destroy(b->iopool);
    gr_image_free(b->image); /* NULL ignored */
    gr_metrics_free(&b->metrics);
    gr_config_free(&b->cfg);
    free(b);
    return status;
}

/* A refused configuration or command line: exit status 2 (README "Configuration"). */
static int refused(struct gr_broker *b)
{
    return exit_early(b, 2);
}

int main(int argc, char **argv)
{
    int64_t t0 = gr_time_mono_ms();
    signal(SIGPIPE, SIG_IGN);
    struct gr_broker *b = calloc(1, sizeof *b);
    gr_config_init(&b->cfg);
    int mode;
    /* a properties file comes first, overrides after: apply in argument order */
    if (parse_args(argc, argv, &b->cfg, &mode) < 0) return refused(b);
    if (mode == 1) {
        printf("gregor %s\n", GREGOR_VERSION);
        return exit_early(b, 0);
    }
    if (mode == 2) {
        usage(stdout);
        return exit_early(b, 0);
    }
    if (mode == 3) return exit_early(b, gr_healthcheck(&b->cfg));
    if (gr_config_check(&b->cfg) < 0)
        return refused(b); /* the rules between keys, once every source is read */
    const char *lvl = gr_config_str(&b->cfg, "gregor.log.level");
    gr_log_set_level(!strcasecmp(lvl, "DEBUG")   ? GR_LOG_DEBUG
                     : !strcasecmp(lvl, "WARN")  ? GR_LOG_WARN
                     : !strcasecmp(lvl, "ERROR") ? GR_LOG_ERROR
                                                 : GR_LOG_INFO);
    enum gr_log_format log_format = GR_LOG_LOGFMT;
    gr_log_format_parse(gr_config_str(&b->cfg, "gregor.log.format"), &log_format); /* checked by config.c */
    gr_log_set_format(log_format);
    if (gr_failpoint_init(getenv("GREGOR_FAILPOINT")) < 0) return refused(b); /* tests only (failpoint.h) */

    b->node_id = (int32_t)gr_config_int(&b->cfg, "node.id");
    if (gr_config_is_set(&b->cfg, "broker.id") && gr_config_int(&b->cfg, "broker.id") >= 0)
        b->node_id = (int32_t)gr_config_int(&b->cfg, "broker.id");
    b->loop = ev_default_loop(EVFLAG_AUTO);
    gr_broker_init_watchers(b);
    int io_err = gr_iopool_create((int)gr_config_int(&b->cfg, "gregor.io.threads"), gr_broker_on_io_done, b,
                                  &b->iopool);
    if (io_err) {
        GR_ERROR("cannot start the I/O threads: %s", strerror(-io_err));
        return 1;
    }

    struct gr_store_config sc;
    gr_store_config_defaults(&sc);
    const char *dir = gr_config_str(&b->cfg, "log.dirs");
    if (!dir) dir = gr_config_str(&b->cfg, "log.dir");
    if (strchr(dir, ',')) {
        fprintf(stderr, "config: log.dirs: Gregor supports one directory, got '%s'\n", dir);
        return refused(b);
    }
    sc.log_dir = dir;
    if (gr_dynconf_load(&b->cfg, dir) < 0) return refused(b); /* kafka-configs.sh --entity-type brokers */
    bool in_cluster = b->cfg.settings.gregor_metadata_etcd_endpoint_count > 0;
    /* --entity-type users (SCRAM): the file on one node; etcd in a cluster (server/security_etcd.h) */
    if (!in_cluster && gr_scram_store_load(&b->scram, dir) < 0) return refused(b);
    gr_dynconf_store_config(&b->cfg, &sc);
    sc.flusher_threads = (int)gr_config_int(&b->cfg, "gregor.flusher.threads");
    sc.cleaner_enable = gr_config_bool(&b->cfg, "log.cleaner.enable");
    sc.cleaner_dedupe_buffer_bytes = gr_config_int(&b->cfg, "log.cleaner.dedupe.buffer.size");
    sc.cleaner_io_bytes_per_second =
        strtod(gr_config_str(&b->cfg, "log.cleaner.io.max.bytes.per.second"), NULL);
    if (sc.cleaner_io_bytes_per_second >= 1e300)
        sc.cleaner_io_bytes_per_second = 0; /* Kafka's default: unlimited */
    sc.cleaner_backoff_ms = gr_config_int(&b->cfg, "log.cleaner.backoff.ms");
    sc.flush_syncfs_min_logs = (int32_t)gr_config_int(&b->cfg, "gregor.flush.syncfs.min.partitions");
    sc.open_segment_fds_max = (int32_t)gr_config_int(&b->cfg, "gregor.open.files.max");
    sc.node_id = b->node_id;
    sc.on_flushed = gr_broker_on_flushed;
    sc.on_flushed_ctx = b;
    /* the metadata image, fed in single-node mode by the store's topic operations (cluster/local.h) */
    if (!(b->image = gr_image_new(b->node_id))) {
        GR_ERROR("out of memory");
        return 1;
    }
    bool cluster = b->cfg.settings.gregor_metadata_etcd_endpoint_count > 0;
    /* until etcd's features key; a cluster made before the key existed has none and keeps the level of the
       builds that made it unless the setting is given (cluster/features.h GR_TRANSACTION_VERSION_UNSTORED) */
    bool tv_given = gr_config_is_set(&b->cfg, "gregor.transaction.version");
    b->image->transaction_version =
        tv_given ? b->cfg.settings.gregor_transaction_version : GR_TRANSACTION_VERSION_UNSTORED;
    sc.on_topic_changed = cluster ? gr_membership_on_topic : gr_image_local_on_topic;
    sc.on_topic_changed_ctx = b->image;
    /* listeners bound first: a bad listener or a busy port stops the broker before it touches the data; they
       listen only once the store is open (gr_net_serve below), so a client connecting during a long load is
       refused and retries instead of waiting unanswered */
    gr_net_init(b);
    if (gr_net_bind(b)) return 1;
    if (gr_net_tls_setup(b)) return refused(b); /* a bad key or certificate stops the broker here */
    gr_metrics_init(&b->metrics);
    b->metrics.version = GREGOR_VERSION;
    /* the admin listener (server/admin_http.h): a busy port or a bad value is a refused config */
    if (gr_admin_http_start(b, &b->admin) < 0) return refused(b);
    if (lock_log_dir(dir) < 0) return 1;
    /* a bad super.users or a damaged ACL file; in a cluster the ACLs come from etcd (no file is read) */
    if (gr_acls_setup(b, cluster ? NULL : dir) < 0) return refused(b);
    /* cluster mode: the cluster id is settled with etcd before the store may write a new meta.properties */
    if (cluster && gr_membership_resolve(b, dir, &sc.cluster_id) < 0) return 1;
    raise_open_files_limit();
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/meta.properties", dir);
    bool dir_old = access(meta, F_OK) == 0; /* made by an earlier start (gregor-features' upgrade rule) */
    int rc = gr_store_open(&sc, &b->store);
    if (rc) {
        GR_ERROR("cannot open log directory %s: %s", dir, strerror(-rc));
        return 1;
    }
    gr_store_set_iopool(b->store, b->iopool); /* a follower's truncation reads there (storage/truncate.c) */
    gr_store_set_start_hook(b->store, gr_metrics_status_start_moved, b); /* records lost (metrics_status.h) */
    /* topic changes (cluster/topic_writer.h): storage's operations on one node; in cluster mode txns on etcd
       (server/membership.c), the local files following through the replica manager */
    b->topic_writer =
        cluster ? gr_membership_topic_writer(b) : gr_topic_writer_local_new(&b->store, &b->iopool);
    if (!b->topic_writer) {
        GR_ERROR("cannot make the topic writer");
        return 1;
    }
    if (!cluster && (rc = gr_broker_image_load(b)) < 0) { /* cluster mode: fed by the member */
        GR_ERROR("cannot build the metadata image: %s", strerror(-rc));
        return 1;
    }
    if (!cluster && (rc = gr_image_local_features(b->image, dir, b->cfg.settings.gregor_transaction_version,
                                                  tv_given, dir_old, &b->features_file)) < 0) {
        GR_ERROR("cannot read or write %s/gregor-features: %s", dir, strerror(-rc));
        return 1;
    }
    /* the visible-offset rule is the partition layer's, set once here (partition/partition.h) */
    struct gr_partitions_config pc = {b->store, gr_config_bool(&b->cfg, "gregor.acks.all.fsync")};
    if (!(b->parts = gr_partitions_create(&pc)) ||
        !(b->fetch_sessions = gr_fsess_cache_new(
              b->cfg.settings.fetch_session_slots, b->cfg.settings.fetch_session_eviction_ms,
              (uint64_t)getpid() ^ (uint64_t)time(NULL) << 20, &b->fetch_session_counts))) {
        GR_ERROR("out of memory");
        return 1;
    }
    int64_t partitions = 0;
    for (int i = 0; i < gr_store_topic_count(b->store); i++) {
        struct gr_topic *t = gr_store_topic_at(b->store, i);
        partitions += gr_topic_partition_count(t);
        for (int32_t p = 0; p < gr_topic_partition_count(t); p++)
            if (gr_topic_log(t, p)) /* NULL: a partition a sparse (cluster-mode) topic does not hold */
                gr_partition_visible_offset(gr_broker_partition(b, gr_topic_log(t, p)));
    }
    gr_store_fds_trim(b->store); /* the load opened every active segment: back under the cap */
    check_open_files(b, partitions);
    /* An existing __consumer_offsets is replayed before the loop serves clients; a missing one is created on
       the first group request (gr_groups_ensure), as Kafka does. */
    if (!cluster && gr_store_topic_find(b->store, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC)) &&
        gr_groups_start(b)) /* cluster mode: no group coordinator yet (server/groups.c gr_groups_defer) */
        return 1;

    /* cluster mode: registered, the whole metadata read and watched before any client is served */
    if (cluster && gr_membership_join(b) < 0) return 1;
    /* cluster mode: the ACLs and SCRAM credentials read from etcd (the loop runs until they are, before
       gr_net_serve: no login or authorization is answered from an empty state) and watched */
    if (cluster && gr_security_etcd_start(b) < 0) return 1;
    /* producer id blocks: the log directory's file, or etcd's counter once registered (the broker epoch) */
    if (gr_producer_ids_start(b)) return 1;
    /* the transaction coordinator: an existing __transaction_state starts loading on the
       I/O pool now (a missing one is created by the first FindCoordinator for a transaction) */
    if (gr_store_topic_find(b->store, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC)) && gr_txns_start(b) < 0) return 1;
    ev_signal_init(&b->sigterm_w, stop_cb, SIGTERM);
    ev_signal_init(&b->sigint_w, stop_cb, SIGINT);
    b->sigterm_w.data = b->sigint_w.data = b;
    ev_signal_start(b->loop, &b->sigterm_w);
    ev_signal_start(b->loop, &b->sigint_w);
    ev_timer_init(&b->housekeeping_timer, housekeeping_cb, 1.0, 1.0);
    b->housekeeping_timer.data = b;
    ev_timer_start(b->loop, &b->housekeeping_timer);
    b->last_retention_ms = b->last_producer_expiry_ms = gr_time_mono_ms();
    if (gr_reqtime_start(b) < 0) return 1; /* request timing and the loop's idle time (request_metrics.h) */
    if (gr_net_serve(b)) return 1;

    const char *audit = getenv("GREGOR_NET_THREAD_AUDIT");
    if (audit && *audit && strcmp(audit, "0") != 0) {
        if (audit[0] == '/' && (audit_fd = open(audit, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
            GR_WARN("GREGOR_NET_THREAD_AUDIT: cannot open %s: %s", audit, strerror(errno));
        gr_sys_audit_this_thread(net_thread_audit_report);
        GR_INFO("network thread audit on: calls that may wait for the disk are logged");
    }
    GR_INFO("gregor %s started in %lld ms: node %d, cluster %s, log dir %s, %d topics", GREGOR_VERSION,
            (long long)(gr_time_mono_ms() - t0), b->node_id, gr_store_cluster_id(b->store), dir,
            gr_store_topic_count(b->store));
    b->ready = true; /* /v1/status/ready: recovery done and, in a cluster, registered (gr_membership_join) */
    ev_run(b->loop, 0);
    gr_admin_http_stop(b->admin); /* no scrape reads the store after this */
    b->admin = NULL;
    gr_sys_audit_this_thread(NULL);   /* shutdown may wait for the disk: nobody is served any more */
    gr_membership_stop_controller(b); /* cluster mode: no partition-state write after this */

    gr_net_close_all(b);
    ev_run(b->loop, EVRUN_NOWAIT); /* let deferred connection frees run */
    /* runs the pending completions: cold-read fetches finish (and are freed); topic operations in flight or
       queued (storage's FIFO) complete and their requests are freed, all before the store closes */
    gr_partitions_stop(b->parts);        /* a stop while a request waits for a cold-read round runs nothing */
    gr_store_set_iopool(b->store, NULL); /* a truncation after this reads on the calling thread */
    gr_iopool_destroy(b->iopool);
    b->iopool = NULL;
    gr_groups_stop(b); /* before parked requests are freed: it drops the JoinGroup/SyncGroup waiters */
    gr_txns_stop(b);   /* the pool is drained: no load or epoch save in flight */
    while (b->parked_head) {
        struct gr_req *r = b->parked_head;
        r->conn = NULL;
        gr_req_free(r);
    }
    gr_producer_ids_stop(b);
    gr_partitions_destroy(b->parts);
    gr_fsess_cache_free(b->fetch_sessions);
    gr_membership_stop_replicas(b); /* the pool is drained: none of its operations is in flight */
    /* The broker's own watchers stop before the store closes: cluster mode runs the loop once more below to
       revoke the lease (gr_membership_stop, up to GR_MEMBER_REVOKE_WAIT_MS), and housekeeping (retention,
       the cleaner) or a flush completion must not fire on a closed store then (it did: a SIGSEGV in the
       cleaner; compat-tests/cluster/e2e.py stops brokers while etcd is paused). */
    ev_timer_stop(b->loop, &b->housekeeping_timer);
    ev_async_stop(b->loop, &b->flush_async);
    ev_async_stop(b->loop, &b->io_async);
    gr_store_close(b->store);
    gr_security_etcd_stop(b);              /* borrows the member's etcd client */
    gr_topic_writer_free(b->topic_writer); /* borrows the member's etcd client */
    gr_membership_stop(b);                 /* revokes the lease: the registration is gone at once */
    gr_image_free(b->image);
    gr_scram_store_clear(&b->scram);
    gr_acls_free(b);
    gr_log_ratelimit_flush(INT64_MAX); /* every count of suppressed warnings still pending */
    GR_INFO("stopped cleanly (%lld parked-request re-checks since start)", (long long)b->rechecks);
    gr_metrics_free(&b->metrics);
    gr_config_free(&b->cfg);
    free(b->flushed); /* flush completions that arrived after the loop stopped */
    free(b);
    return 0;
}
