/*
 * test_txn_codec.c: the transaction APIs' messages in the generated codec (issue #21; the handlers are
 * server/handlers/'s). AddPartitionsToTxn (24), AddOffsetsToTxn (25),
 * EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66).
 *  - hand-written frames decode to the fields Kafka's message definitions place there (the v0-3 single
 *    transaction and the v4+ batched shape of AddPartitionsToTxn with VerifyOnly; WriteTxnMarkers v2's
 *    TransactionVersion; EndTxn v5's producer id and epoch), and encode back to the same bytes;
 *  - every strict prefix of every message at every version is refused (a truncated field anywhere);
 *  - a length or count beyond the bytes left is refused before anything is allocated for it, and a null in
 *    a non-nullable field is refused.
 * Field placement against Kafka's own classes is scripts/oracle-check.sh (protocol/oracle).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/gen/messages.h"
#include "protocol/tests/support.h"

#define ARENA_BYTES (1 << 16)

static const int16_t txn_keys[] = {24, 25, 26, 27, 28, 65, 66};

/* Decodes `b` as the (key, version) request or response body into `msg` (at least struct_bytes long) with
 * the arena `a`; returns the gr_wire_err, *left the bytes not consumed. */
static int decode_into(struct gr_arena *a, int16_t key, bool response, int16_t version, const uint8_t *b,
                       size_t n, void *msg, size_t *left)
{
    const struct gr_msg_ops *ops = gr_msg_ops_find(key, response);
    assert_non_null(ops);
    assert_in_range(version, ops->version_min, ops->version_max);
    struct gr_rd rd;
    gr_rd_init(&rd, b, n, a);
    int err = ops->decode(&rd, version, msg);
    if (left) *left = gr_rd_left(&rd);
    return err;
}

/* Decodes with a fresh arena; returns the gr_wire_err and *arena_used (may be NULL) the arena bytes taken. */
static int decode_req(int16_t key, int16_t version, const uint8_t *b, size_t n, size_t *arena_used)
{
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    uint8_t msg[1024];
    assert_true(gr_msg_ops_find(key, false)->struct_bytes <= sizeof msg);
    int err = decode_into(&a, key, false, version, b, n, msg, NULL);
    if (arena_used) *arena_used = a.used_bytes;
    gr_arena_reset(&a);
    return err;
}

/* Encodes the decoded `msg` again and asserts the bytes equal `b`. */
static void assert_reencodes(int16_t key, bool response, int16_t version, const void *msg, const uint8_t *b,
                             size_t n)
{
    const struct gr_msg_ops *ops = gr_msg_ops_find(key, response);
    assert_int_equal(ops->size(msg, version), n);
    uint8_t *out = malloc(n + 1);
    struct gr_wr wr;
    gr_wr_init(&wr, out, n);
    ops->encode(&wr, msg, version);
    assert_int_equal((size_t)(wr.p - out), n);
    assert_memory_equal(out, b, n);
    free(out);
}

/* ---- codec rows ---- */

static void test_rows_and_ranges(void **state)
{
    (void)state;
    /* validVersions and flexibleVersions of Kafka 4.4.0's *Request.json / *Response.json */
    static const struct {
        int16_t key, min, max, flexible;
    } kafka[] = {
        {24, 0, 5, 3}, {25, 0, 4, 3}, {26, 0, 5, 3}, {27, 1, 2, 1},
        {28, 0, 6, 3}, {65, 0, 0, 0}, {66, 0, 2, 0},
    };
    for (size_t i = 0; i < sizeof kafka / sizeof kafka[0]; i++) {
        for (int r = 0; r < 2; r++) {
            const struct gr_msg_ops *ops = gr_msg_ops_find(kafka[i].key, r);
            assert_non_null(ops);
            assert_non_null(gr_msg_test_ops_find(kafka[i].key, r));
            assert_int_equal(ops->version_min, kafka[i].min);
            assert_int_equal(ops->version_max, kafka[i].max);
            assert_int_equal(ops->flexible_min, kafka[i].flexible);
        }
    }
}

/* ---- AddPartitionsToTxn ---- */

static void test_add_partitions_v3_single_transaction(void **state)
{
    (void)state;
    /* v3 (flexible, client shape): transactional id "t", producer id 7, epoch 1, topics [ {"a", [0, 2]} ] */
    static const uint8_t b[] = {2, 't', 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 2,
                                2, 'a', 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0};
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_add_partitions_to_txn_request m;
    size_t left = 99;
    assert_int_equal(decode_into(&a, 24, false, 3, b, sizeof b, &m, &left), 0);
    assert_int_equal(left, 0);
    assert_true(gr_str_eq_c(m.v3_and_below_transactional_id, "t"));
    assert_int_equal(m.v3_and_below_producer_id, 7);
    assert_int_equal(m.v3_and_below_producer_epoch, 1);
    assert_int_equal(m.v3_and_below_topics.count, 1);
    assert_true(gr_str_eq_c(m.v3_and_below_topics.items[0].name, "a"));
    assert_int_equal(m.v3_and_below_topics.items[0].partitions.count, 2);
    assert_int_equal(m.v3_and_below_topics.items[0].partitions.items[1], 2);
    assert_int_equal(m.transactions.count, 0); /* v4+ only */
    assert_reencodes(24, false, 3, &m, b, sizeof b);
    gr_arena_reset(&a);
}

static void test_add_partitions_v4_batched_verify_only(void **state)
{
    (void)state;
    /* v4 (broker to broker): transactions [
     *   {"t", producer id 7, epoch 1, verify only true, topics [ {"a", [3]} ]},
     *   {"u", producer id 8, epoch 0, verify only false, topics []} ] */
    static const uint8_t b[] = {3,
                                /* first */ 2,
                                't',
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                7,
                                0,
                                1,
                                1,
                                2,
                                2,
                                'a',
                                2,
                                0,
                                0,
                                0,
                                3,
                                0,
                                0,
                                /* second */ 2,
                                'u',
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                8,
                                0,
                                0,
                                0,
                                1,
                                0,
                                /* top tags */ 0};
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_add_partitions_to_txn_request m;
    size_t left = 99;
    assert_int_equal(decode_into(&a, 24, false, 4, b, sizeof b, &m, &left), 0);
    assert_int_equal(left, 0);
    assert_int_equal(m.transactions.count, 2);
    const struct gr_add_partitions_to_txn_request_add_partitions_to_txn_transaction *t = m.transactions.items;
    assert_true(gr_str_eq_c(t[0].transactional_id, "t"));
    assert_int_equal(t[0].producer_id, 7);
    assert_int_equal(t[0].producer_epoch, 1);
    assert_true(t[0].verify_only);
    assert_int_equal(t[0].topics.count, 1);
    assert_true(gr_str_eq_c(t[0].topics.items[0].name, "a"));
    assert_int_equal(t[0].topics.items[0].partitions.count, 1);
    assert_int_equal(t[0].topics.items[0].partitions.items[0], 3);
    assert_true(gr_str_eq_c(t[1].transactional_id, "u"));
    assert_int_equal(t[1].producer_id, 8);
    assert_false(t[1].verify_only);
    assert_int_equal(t[1].topics.count, 0);
    assert_reencodes(24, false, 4, &m, b, sizeof b);
    gr_arena_reset(&a);
}

static void test_add_partitions_v4_response_per_transaction(void **state)
{
    (void)state;
    /* v4: throttle 0, error 0, results_by_transaction [ {"t", [ {"a", [ {partition 3, error 48} ]} ]} ] */
    static const uint8_t b[] = {0, 0, 0, 0, 0, 0, 2, 2, 't', 2, 2, 'a', 2, 0, 0, 0, 3, 0, 48, 0, 0, 0, 0};
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_add_partitions_to_txn_response m;
    size_t left = 99;
    assert_int_equal(decode_into(&a, 24, true, 4, b, sizeof b, &m, &left), 0);
    assert_int_equal(left, 0);
    assert_int_equal(m.results_by_transaction.count, 1);
    assert_true(gr_str_eq_c(m.results_by_transaction.items[0].transactional_id, "t"));
    const struct gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *tr =
        m.results_by_transaction.items[0].topic_results.items;
    assert_true(gr_str_eq_c(tr[0].name, "a"));
    assert_int_equal(tr[0].results_by_partition.items[0].partition_index, 3);
    assert_int_equal(tr[0].results_by_partition.items[0].partition_error_code, 48);
    assert_reencodes(24, true, 4, &m, b, sizeof b);
    /* v3 shape: throttle, results_by_topic_v3_and_below [ {"a", [ {3, 48} ]} ], no top-level error code */
    static const uint8_t b3[] = {0, 0, 0, 0, 2, 2, 'a', 2, 0, 0, 0, 3, 0, 48, 0, 0, 0};
    assert_int_equal(decode_into(&a, 24, true, 3, b3, sizeof b3, &m, &left), 0);
    assert_int_equal(left, 0);
    assert_int_equal(m.results_by_topic_v3_and_below.count, 1);
    assert_int_equal(
        m.results_by_topic_v3_and_below.items[0].results_by_partition.items[0].partition_error_code, 48);
    assert_reencodes(24, true, 3, &m, b3, sizeof b3);
    gr_arena_reset(&a);
}

/* ---- EndTxn, WriteTxnMarkers ---- */

static void test_end_txn_v5_producer_fields(void **state)
{
    (void)state;
    struct gr_end_txn_response m;
    gr_end_txn_response_init(&m);
    assert_int_equal(m.producer_id, -1); /* Kafka's default for the v5+ fields */
    assert_int_equal(m.producer_epoch, -1);
    m.producer_id = 9;
    m.producer_epoch = 3;
    /* v4: throttle, error, tags; v5 adds producer id (int64) and epoch (int16) before the tags */
    assert_int_equal(gr_end_txn_response_size(&m, 4), 7);
    static const uint8_t b5[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 3, 0};
    assert_reencodes(26, true, 5, &m, b5, sizeof b5);
    /* request v0 (classic): "t", producer id 1, epoch 2, committed true */
    static const uint8_t r0[] = {0, 1, 't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 1};
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_end_txn_request req;
    size_t left = 99;
    assert_int_equal(decode_into(&a, 26, false, 0, r0, sizeof r0, &req, &left), 0);
    assert_int_equal(left, 0);
    assert_true(gr_str_eq_c(req.transactional_id, "t"));
    assert_int_equal(req.producer_id, 1);
    assert_int_equal(req.producer_epoch, 2);
    assert_true(req.committed);
    gr_arena_reset(&a);
}

static void test_write_txn_markers_v1_v2(void **state)
{
    (void)state;
    /* v2: markers [ {producer id 5, epoch 2, commit, topics [ {"a", [1]} ], coordinator epoch 6,
     * transaction version 1} ]; v1 is the same without the transaction version byte */
    static const uint8_t v2[] = {2,   0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 1, 2, 2,
                                 'a', 2, 0, 0, 0, 1, 0, 0, 0, 0, 6, 1, 0, 0};
    static const uint8_t v1[] = {2,   0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 1, 2, 2,
                                 'a', 2, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0};
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_write_txn_markers_request m;
    size_t left = 99;
    assert_int_equal(decode_into(&a, 27, false, 2, v2, sizeof v2, &m, &left), 0);
    assert_int_equal(left, 0);
    assert_int_equal(m.markers.count, 1);
    assert_int_equal(m.markers.items[0].producer_id, 5);
    assert_int_equal(m.markers.items[0].producer_epoch, 2);
    assert_true(m.markers.items[0].transaction_result);
    assert_int_equal(m.markers.items[0].coordinator_epoch, 6);
    assert_int_equal(m.markers.items[0].transaction_version, 1);
    assert_int_equal(m.markers.items[0].topics.items[0].partition_indexes.items[0], 1);
    assert_reencodes(27, false, 2, &m, v2, sizeof v2);
    assert_int_equal(decode_into(&a, 27, false, 1, v1, sizeof v1, &m, &left), 0);
    assert_int_equal(left, 0);
    assert_int_equal(m.markers.items[0].coordinator_epoch, 6);
    assert_int_equal(m.markers.items[0].transaction_version, 0); /* default below v2 */
    assert_reencodes(27, false, 1, &m, v1, sizeof v1);
    /* Kafka 4.0 removed v0 */
    assert_int_equal(gr_msg_ops_find(27, false)->version_min, 1);
    gr_arena_reset(&a);
}

/* ---- truncation: every strict prefix of every message is refused ---- */

static void test_every_prefix_refused(void **state)
{
    (void)state;
    struct gr_rng rng;
    gr_rng_seed(&rng, 2126);
    int checked = 0;
    for (size_t k = 0; k < sizeof txn_keys / sizeof txn_keys[0]; k++) {
        for (int r = 0; r < 2; r++) {
            const struct gr_msg_ops *ops = gr_msg_ops_find(txn_keys[k], r);
            const struct gr_msg_test_ops *tops = gr_msg_test_ops_find(txn_keys[k], r);
            for (int16_t v = ops->version_min; v <= ops->version_max; v++) {
                for (int round = 0; round < 8; round++) {
                    struct gr_arena a;
                    gr_arena_init(&a, 0);
                    void *m = gr_arena_alloc(&a, ops->struct_bytes);
                    void *m2 = gr_arena_alloc(&a, ops->struct_bytes);
                    tops->random(&rng, &a, m, v);
                    size_t n = ops->size(m, v);
                    uint8_t *buf = malloc(n + 1);
                    struct gr_wr wr;
                    gr_wr_init(&wr, buf, n);
                    ops->encode(&wr, m, v);
                    size_t left = 99;
                    assert_int_equal(decode_into(&a, txn_keys[k], r, v, buf, n, m2, &left), 0);
                    assert_int_equal(left, 0);
                    for (size_t cut = 0; cut < n; cut++) {
                        struct gr_arena a2;
                        gr_arena_init(&a2, ARENA_BYTES);
                        int err = decode_into(&a2, txn_keys[k], r, v, buf, cut, m2, NULL);
                        /* short, or a length / count / tag count beyond the bytes left */
                        if (err != GR_WIRE_SHORT && err != GR_WIRE_BAD_LENGTH && err != GR_WIRE_BAD_TAGS)
                            fail_msg("%s v%d cut at %zu of %zu: error %d", ops->name, v, cut, n, err);
                        gr_arena_reset(&a2);
                        checked++;
                    }
                    free(buf);
                    gr_arena_reset(&a);
                }
            }
        }
    }
    assert_true(checked > 10000);
}

/* ---- lengths and counts beyond the bytes left; nulls where not allowed ---- */

static void test_oversized_fields_refused(void **state)
{
    (void)state;
    size_t used = 1;
    /* AddPartitionsToTxn v2 (classic): "t", producer id, epoch, topics count INT32_MAX with 2 bytes left */
    static const uint8_t apt_topics[] = {0, 1, 't', 0,    0,    0,    0,    0, 0, 0,
                                         7, 0, 1,   0x7f, 0xff, 0xff, 0xff, 0, 0};
    assert_int_equal(decode_req(24, 2, apt_topics, sizeof apt_topics, &used), GR_WIRE_BAD_LENGTH);
    assert_int_equal(used, 0);
    /* ... one topic "a" whose partitions claim 1000 int32s with 8 bytes left */
    static const uint8_t apt_parts[] = {0, 1, 't', 0,   0, 0, 0, 0,    0, 0, 7, 0, 1, 0, 0, 0,
                                        1, 0, 1,   'a', 0, 0, 3, 0xe8, 0, 0, 0, 1, 0, 0, 0, 2};
    assert_int_equal(decode_req(24, 2, apt_parts, sizeof apt_parts, &used), GR_WIRE_BAD_LENGTH);
    assert_true(used < 1000 * sizeof(int32_t));
    /* v4: transactions compact count 2^32 - 2 */
    static const uint8_t apt_txns[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 2, 't', 0};
    assert_int_equal(decode_req(24, 4, apt_txns, sizeof apt_txns, &used), GR_WIRE_BAD_LENGTH);
    assert_int_equal(used, 0);
    /* v3: transactional id compact length 200 with 2 bytes left */
    static const uint8_t apt_tid[] = {0xc9, 0x01, 'a', 'b'};
    assert_int_equal(decode_req(24, 3, apt_tid, sizeof apt_tid, NULL), GR_WIRE_BAD_LENGTH);

    /* AddOffsetsToTxn v0: transactional id length INT16_MAX with 3 bytes left; null (-1) is not allowed */
    static const uint8_t aot_long[] = {0x7f, 0xff, 'a', 'b', 'c'};
    assert_int_equal(decode_req(25, 0, aot_long, sizeof aot_long, NULL), GR_WIRE_BAD_LENGTH);
    static const uint8_t aot_null[] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 'g'};
    assert_int_equal(decode_req(25, 0, aot_null, sizeof aot_null, NULL), GR_WIRE_NULL);
    /* v3: group id compact 0 = null, not nullable */
    static const uint8_t aot_group_null[] = {2, 't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
    assert_int_equal(decode_req(25, 3, aot_group_null, sizeof aot_group_null, NULL), GR_WIRE_NULL);

    /* EndTxn v3: transactional id compact length 2^32 - 2 */
    static const uint8_t et_tid[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 't', 0, 0, 0, 0};
    assert_int_equal(decode_req(26, 3, et_tid, sizeof et_tid, NULL), GR_WIRE_BAD_LENGTH);

    /* WriteTxnMarkers v1: markers compact count 2^32 - 2; one marker whose partition_indexes claim 1000 */
    static const uint8_t wtm_markers[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0};
    assert_int_equal(decode_req(27, 1, wtm_markers, sizeof wtm_markers, &used), GR_WIRE_BAD_LENGTH);
    assert_int_equal(used, 0);
    static const uint8_t wtm_parts[] = {2,   0,    0,    0, 0, 0, 0, 0, 5, 0, 2, 1, 2, 2,
                                        'a', 0xe9, 0x07, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0};
    assert_int_equal(decode_req(27, 1, wtm_parts, sizeof wtm_parts, &used), GR_WIRE_BAD_LENGTH);
    assert_true(used < 1000 * sizeof(int32_t));

    /* TxnOffsetCommit v2 (classic): "t", "g", producer id, epoch, topics [ {"a", [ {partition 0, offset 0,
     * leader epoch -1, metadata ...} ]} ]: metadata null is fine, metadata of 0x7000 bytes with 1 left is not
     */
    uint8_t toc[] = {0, 1, 't', 0, 1, 'g', 0, 0,   0, 0,    0,    0,    0,    1,    0,
                     0, 0, 0,   0, 1, 0,   1, 'a', 0, 0,    0,    1,    0,    0,    0,
                     0, 0, 0,   0, 0, 0,   0, 0,   0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(decode_req(28, 2, toc, sizeof toc, NULL), 0);
    toc[sizeof toc - 2] = 0x70;
    toc[sizeof toc - 1] = 0x00;
    uint8_t toc_long[sizeof toc + 1];
    memcpy(toc_long, toc, sizeof toc);
    toc_long[sizeof toc] = 'm';
    assert_int_equal(decode_req(28, 2, toc_long, sizeof toc_long, NULL), GR_WIRE_BAD_LENGTH);
    /* v3: group instance id is nullable (compact 0), member id is not */
    static const uint8_t toc3[] = {2,
                                   't',
                                   2,
                                   'g',
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   1,
                                   0,
                                   0,
                                   0xff,
                                   0xff,
                                   0xff,
                                   0xff,
                                   1 /* member id "" */,
                                   0 /* instance null */,
                                   1 /* topics [] */,
                                   0};
    assert_int_equal(decode_req(28, 3, toc3, sizeof toc3, NULL), 0);
    uint8_t toc3_bad[sizeof toc3];
    memcpy(toc3_bad, toc3, sizeof toc3);
    toc3_bad[18] = 0; /* member id null */
    assert_int_equal(decode_req(28, 3, toc3_bad, sizeof toc3_bad, NULL), GR_WIRE_NULL);

    /* DescribeTransactions v0: transactional_ids compact count 2^32 - 2 */
    static const uint8_t dt[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 2, 't', 0};
    assert_int_equal(decode_req(65, 0, dt, sizeof dt, &used), GR_WIRE_BAD_LENGTH);
    assert_int_equal(used, 0);

    /* ListTransactions v1: state_filters [], producer_id_filters claim 1000 int64s with 8 bytes left */
    static const uint8_t lt[] = {1, 0xe9, 0x07, 0, 0, 0, 0, 0, 0, 0, 1};
    assert_int_equal(decode_req(66, 1, lt, sizeof lt, &used), GR_WIRE_BAD_LENGTH);
    assert_int_equal(used, 0);
    /* v2: transactional id pattern null is allowed; v0-1 have no pattern */
    static const uint8_t lt2[] = {1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0};
    assert_int_equal(decode_req(66, 2, lt2, sizeof lt2, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_and_ranges),
        cmocka_unit_test(test_add_partitions_v3_single_transaction),
        cmocka_unit_test(test_add_partitions_v4_batched_verify_only),
        cmocka_unit_test(test_add_partitions_v4_response_per_transaction),
        cmocka_unit_test(test_end_txn_v5_producer_fields),
        cmocka_unit_test(test_write_txn_markers_v1_v2),
        cmocka_unit_test(test_every_prefix_refused),
        cmocka_unit_test(test_oversized_fields_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
