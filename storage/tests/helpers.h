/*
 * helpers.h: shared test support for storage tests: temporary log directories, RecordBatch v2 builders
 * (on protocol's gr_batch_build), a store opener with small segments, an on_flushed recorder that tests
 * can wait on, and a reader that walks every batch of a log through gr_log_read slices.
 * Read next: test_log.c.
 */
#ifndef GR_STORAGE_TEST_HELPERS_H
#define GR_STORAGE_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/record_batch.h"
#include "storage/log.h"
#include "storage/store.h"

/* A fresh empty directory under /tmp (static buffer per call site is the caller's). */
void th_tmpdir(char *out, size_t cap);
void th_rmtree(const char *path);

/* Batch to build: `count` records, timestamps ts0, ts0 + ts_step, ...; value i = "<tag>:<i>" padded with
   'x' to value_bytes; producer fields as given (pid -1 for none). Returns malloc'd bytes, *len set. */
struct th_batch_spec {
    int32_t count;
    int64_t ts0;
    int64_t ts_step;
    uint32_t tag;
    size_t value_bytes;
    enum gr_codec codec;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    bool transactional;
};
uint8_t *th_batch(const struct th_batch_spec *spec, size_t *len);
/* Simplest form: `count` uncompressed records at timestamp ts (step 1), tag, no producer. */
uint8_t *th_simple(int32_t count, int64_t ts, uint32_t tag, size_t *len);

/* on_flushed recorder: install with th_flush_hook(&cfg); wait with th_wait_durable. */
void th_flush_hook(struct gr_store_config *cfg);
void th_flush_reset(void);
/* Waits (up to 10 s) until on_flushed reported `log` durable to >= offset or an error; returns the last
   reported error for that log (0 when durable). */
int th_wait_durable(struct gr_log *log, int64_t offset);
/* Number of on_flushed calls with err < 0 so far, and the last such error. */
int th_flush_errors(int *last_err);
/* Largest durable offset reported for any log so far (single-log tests). */
int64_t th_reported_durable(void);

/* Store config with small segments for tests (flushers 2, index interval 100 bytes). */
void th_config(struct gr_store_config *cfg, const char *dir);

/* The cmocka fixture most store tests share: a fresh directory and th_config's config; the test opens the
 * store (and finds its topic and log) itself. th_store_setup makes it (*state); th_store_teardown closes the
 * store when it was opened and removes the directory. Both return 0. */
struct th_store_fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_topic *topic;
    struct gr_log *log;
};
int th_store_setup(void **state);
int th_store_teardown(void **state);

/* One batch as seen by a reader. */
struct th_seen {
    int64_t base_offset;
    int64_t last_offset;
    int64_t max_timestamp;
    int32_t leader_epoch;
    int32_t record_count;
    uint32_t tag; /* parsed from the first record's value "<tag>:<i>" */
    int64_t producer_id;
    int32_t base_sequence;
};
/* Reads every batch from `from` to the log end (upper bound = log end), checking each CRC, whole batches
   and contiguity. Returns the count (array in *out, malloc'd) or -1 on any inconsistency (message printed).
 */
int th_read_all(struct gr_log *log, int64_t from, int64_t upper_bound, struct th_seen **out);
/* Same, also applying every batch header to `ps` (a fresh state), to compare with the log's own. */
struct gr_producer_state;
int th_read_all_ps(struct gr_log *log, int64_t from, int64_t upper_bound, struct th_seen **out,
                   struct gr_producer_state *ps);
/* Reads the bytes of a slice into a new buffer. */
uint8_t *th_slice_bytes(const struct gr_log_slice *s);

#endif
