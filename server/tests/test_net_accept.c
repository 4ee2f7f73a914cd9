/*
 * test_net_accept.c: the accept path when a new connection's memory cannot be allocated (issue 18, "fix on
 * the way": accept_cb wrote the read buffer's pointer into the connection before checking that the
 * connection itself was allocated). A real listener on a free loopback port, the broker's libev loop run by
 * the test, real client sockets; gr_net_conn_alloc (the seam) fails one chosen allocation:
 *   - the connection's state: the accepted descriptor is closed (the client reads end of file and the
 *     process holds one descriptor more than before the connect: the client's), no connection is counted,
 *     and the next client is served (an ApiVersions v0 answered with its correlation id and no error);
 *   - the connection's read buffer: the same, and the half-made connection is freed.
 * Read next: server/net.c (accept_cb, conn_alloc), server/tests/fixture.h.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/time.h"
#include "server/tests/fixture.h"

struct fx {
    char dir[64];
    struct gr_broker *b;
    int port;
};

static int32_t be32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static int16_t be16(const uint8_t *p)
{
    return (int16_t)(p[0] << 8 | p[1]);
}

static int allocs;  /* calls of failing_alloc since the test set fail_at */
static int fail_at; /* the call (1-based) that returns NULL; 0: none */

static void *failing_alloc(size_t bytes)
{
    allocs++;
    if (allocs == fail_at) return NULL;
    return malloc(bytes);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){0});
    assert_int_equal(gr_config_set(&f->b->cfg, "listeners", "PLAINTEXT://127.0.0.1:0"), 0);
    gr_net_init(f->b);
    assert_int_equal(gr_net_bind(f->b), 0);
    assert_int_equal(gr_net_serve(f->b), 0);
    f->port = f->b->listeners[0].port;
    assert_true(f->port > 0);
    allocs = 0;
    fail_at = 0;
    gr_net_conn_alloc = failing_alloc;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_net_conn_alloc = malloc;
    gr_net_close_all(f->b);
    for (int i = 0; i < 3; i++)
        ev_run(f->b->loop, EVRUN_NOWAIT); /* the connections' deferred frees */
    assert_null(f->b->conns);
    srv_broker_close(f->b, f->dir, NULL);
    free(f);
    return 0;
}

/* Descriptors this process holds (entries of /proc/self/fd, less the one opendir holds). */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1;
}

static int client_connect(struct fx *f)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0); /* the backlog completes it */
    return fd;
}

/* Runs the broker's loop until `fd` (a client) has `want` bytes in `buf` or reads end of file, for at most
 * 5 s. Returns the bytes read, or -1 on end of file before `want`. */
static int pump_read(struct fx *f, int fd, uint8_t *buf, int want)
{
    int got = 0;
    int64_t deadline = gr_time_mono_ms() + 5000;
    while (gr_time_mono_ms() < deadline) {
        ev_run(f->b->loop, EVRUN_NOWAIT);
        ssize_t n = recv(fd, buf + got, (size_t)(want - got), MSG_DONTWAIT);
        if (n == 0) return -1;
        if (n > 0) got += (int)n;
        if (got == want) return got;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) fail_msg("recv: %s", strerror(errno));
        usleep(1000);
    }
    fail_msg("no answer and no end of file within 5 s (%d of %d bytes)", got, want);
    return -2;
}

/* A new client's ApiVersions v0 (correlation id 7) is answered: the broker still serves. */
static void assert_serves(struct fx *f)
{
    int fd = client_connect(f);
    static const uint8_t req[] = {0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff}; /* null client id */
    assert_int_equal(send(fd, req, sizeof req, 0), (ssize_t)sizeof req);
    uint8_t head[10]; /* size, correlation id, error code */
    assert_int_equal(pump_read(f, fd, head, sizeof head), (int)sizeof head);
    assert_true(be32(head) > 6);
    assert_int_equal(be32(head + 4), 7);
    assert_int_equal(be16(head + 8), 0);
    assert_int_equal(f->b->conn_count, 1);
    close(fd);
}

/* The allocation number `which` (1: the connection, 2: its read buffer) of the next accept fails. */
static void accept_alloc_fails(struct fx *f, int which)
{
    int before = open_fds();
    fail_at = allocs + which;
    int fd = client_connect(f);
    uint8_t b;
    assert_int_equal(pump_read(f, fd, &b, 1), -1); /* end of file: the broker closed its side */
    assert_int_equal(allocs, which);               /* the failing allocation ran, nothing after it */
    assert_int_equal(f->b->conn_count, 0);
    assert_null(f->b->conns);
    assert_int_equal(open_fds(), before + 1); /* only the client's descriptor: the accepted one is closed */
    close(fd);
    assert_serves(f);
    assert_int_equal(allocs, which + 2); /* the served connection: state and read buffer */
}

static void test_conn_alloc_fails(void **state)
{
    accept_alloc_fails(*state, 1);
}

static void test_read_buffer_alloc_fails(void **state)
{
    accept_alloc_fails(*state, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conn_alloc_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_buffer_alloc_fails, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
