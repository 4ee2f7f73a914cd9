/*
 * fixture.h: the broker the server unit tests drive handlers against: a struct gr_broker with a default
 * configuration, its own libev loop (never run unless a test runs it), the flush and I/O watchers, a real
 * store in a fresh temporary directory and, when asked, a real I/O pool; no listener, no connection. It is
 * what main.c sets up, minus the network, and srv_broker_close takes it down in main.c's order. A test
 * keeps its own fixture struct (the directory, the broker, its topics) and calls these from its cmocka
 * setup and teardown. Compiled into each test that uses it (server/tests/CMakeLists.txt).
 * Read next: server/tests/fixture.c, storage/tests/helpers.h (th_config, th_tmpdir).
 */
#ifndef GR_SERVER_TESTS_FIXTURE_H
#define GR_SERVER_TESTS_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/broker.h"

/* What differs between the tests' brokers; a zeroed struct is the plain broker. */
struct srv_broker_opts {
    bool iopool;              /* an I/O pool of two threads in b->iopool */
    bool hwm_durable;         /* b->parts' visible_is_durable: the high watermark waits for the flush */
    bool on_flushed;          /* the store reports flushes to the broker (gr_broker_on_flushed) */
    int32_t node_id;          /* b->node_id (0 by default, as a zeroed broker) */
    int open_segment_fds_max; /* the store's open-file cap; 0 keeps th_config's */
    bool reuse_dir;           /* open the store in `dir` as it is (a restart) instead of a fresh directory */
};

/* Makes a fresh temporary directory (written to dir, `cap` bytes; with opts->reuse_dir `dir` already names
 * one, opened as it is) and a broker on a store in it, as described above; fails the running cmocka test on
 * any error. Returns the broker (heap, owned by the caller until srv_broker_close). */
struct gr_broker *srv_broker_open(char *dir, size_t cap, const struct srv_broker_opts *opts);

/* Takes down a broker from srv_broker_open in main.c's order: the I/O pool, the group coordinator, the
 * parked requests (freed, not answered), the store; then `after_store_close` (may be NULL: e.g. a test's
 * syscall shim is removed here), the loop, the config, the waiters and the queued flush completions; frees
 * the broker and removes `dir` with everything in it (dir NULL: the directory is kept, for a restart). */
void srv_broker_close(struct gr_broker *b, const char *dir, void (*after_store_close)(void));

/* A request without a connection for `b`: header api key and version set, an arena of `arena_bytes`, no
 * body or response yet (the caller allocates them in the arena). gr_req_finish or gr_req_free frees it. */
struct gr_req *srv_req_new(struct gr_broker *b, int16_t api_key, int16_t api_version, size_t arena_bytes);

#endif
