/* test_wire.c: the byte primitives of protocol/wire.h on known encodings and on malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/wire.h"

static void test_fixed_width(void **state)
{
    (void)state;
    static const uint8_t b[] = {0x81, 0x80, 0x01, 0xff, 0xff, 0xff, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1};
    struct gr_rd rd;
    gr_rd_init(&rd, b, sizeof b, NULL);
    assert_int_equal(gr_rd_int8(&rd), -127);
    assert_int_equal(gr_rd_int16(&rd), (int16_t)0x8001);
    assert_int_equal(gr_rd_int32(&rd), -2);
    assert_true(gr_rd_int64(&rd) == (int64_t)0x8000000000000001ull);
    assert_int_equal(rd.err, 0);
    assert_int_equal(gr_rd_int8(&rd), 0);
    assert_int_equal(rd.err, GR_WIRE_SHORT);
}

static void test_varints(void **state)
{
    (void)state;
    /* zig-zag: 0->0, -1->1, 1->2, -64->127, 64->128 (0x80 0x01) */
    static const struct {
        int64_t v;
        uint8_t enc[10];
        size_t n;
    } cases[] = {{0, {0}, 1},
                 {-1, {1}, 1},
                 {1, {2}, 1},
                 {-64, {0x7f}, 1},
                 {64, {0x80, 1}, 2},
                 {INT32_MAX, {0xfe, 0xff, 0xff, 0xff, 0x0f}, 5},
                 {INT32_MIN, {0xff, 0xff, 0xff, 0xff, 0x0f}, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t buf[10];
        struct gr_wr wr;
        gr_wr_init(&wr, buf, sizeof buf);
        gr_wr_varint(&wr, (int32_t)cases[i].v);
        assert_int_equal((size_t)(wr.p - buf), cases[i].n);
        assert_memory_equal(buf, cases[i].enc, cases[i].n);
        assert_int_equal(gr_sz_varint((int32_t)cases[i].v), cases[i].n);
        struct gr_rd rd;
        gr_rd_init(&rd, buf, cases[i].n, NULL);
        assert_int_equal(gr_rd_varint(&rd), cases[i].v);
        assert_int_equal(rd.err, 0);
    }
    /* varlong extremes */
    uint8_t buf[10];
    struct gr_wr wr;
    gr_wr_init(&wr, buf, sizeof buf);
    gr_wr_varlong(&wr, INT64_MIN);
    assert_int_equal(wr.p - buf, 10);
    struct gr_rd rd;
    gr_rd_init(&rd, buf, 10, NULL);
    assert_true(gr_rd_varlong(&rd) == INT64_MIN);
}

static void test_overlong_varint(void **state)
{
    (void)state;
    static const uint8_t six[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    struct gr_rd rd;
    gr_rd_init(&rd, six, sizeof six, NULL);
    gr_rd_uvarint(&rd);
    assert_int_equal(rd.err, GR_WIRE_BAD_VARINT);
    static const uint8_t unterminated[] = {0x80, 0x80};
    gr_rd_init(&rd, unterminated, sizeof unterminated, NULL);
    gr_rd_varint(&rd);
    assert_int_equal(rd.err, GR_WIRE_SHORT);
    /* a 5-byte uvarint above UINT32_MAX */
    static const uint8_t big[] = {0xff, 0xff, 0xff, 0xff, 0x7f};
    gr_rd_init(&rd, big, sizeof big, NULL);
    gr_rd_uvarint(&rd);
    assert_int_equal(rd.err, GR_WIRE_BAD_VARINT);
}

static void test_strings(void **state)
{
    (void)state;
    static const uint8_t classic[] = {0, 3, 'a', 'b', 'c', 0xff, 0xff};
    struct gr_rd rd;
    gr_rd_init(&rd, classic, sizeof classic, NULL);
    struct gr_str s = gr_rd_string(&rd, false, false);
    assert_true(gr_str_eq_c(s, "abc"));
    s = gr_rd_string(&rd, false, true);
    assert_int_equal(s.len, -1);
    assert_int_equal(rd.err, 0);
    /* compact: N+1, 0 = null */
    static const uint8_t compact[] = {4, 'x', 'y', 'z', 0, 1};
    gr_rd_init(&rd, compact, sizeof compact, NULL);
    assert_true(gr_str_eq_c(gr_rd_string(&rd, true, false), "xyz"));
    assert_int_equal(gr_rd_string(&rd, true, true).len, -1);
    assert_int_equal(gr_rd_string(&rd, true, false).len, 0);
    assert_int_equal(rd.err, 0);
    /* compact null on a non-nullable field */
    static const uint8_t cnull[] = {0};
    gr_rd_init(&rd, cnull, 1, NULL);
    gr_rd_string(&rd, true, false);
    assert_int_equal(rd.err, GR_WIRE_NULL);
    /* string past the end */
    static const uint8_t past[] = {0, 9, 'a'};
    gr_rd_init(&rd, past, sizeof past, NULL);
    gr_rd_string(&rd, false, false);
    assert_int_equal(rd.err, GR_WIRE_BAD_LENGTH);
    /* negative length other than -1 */
    static const uint8_t neg[] = {0xff, 0xfe};
    gr_rd_init(&rd, neg, sizeof neg, NULL);
    gr_rd_string(&rd, false, true);
    assert_int_equal(rd.err, GR_WIRE_BAD_LENGTH);
}

static void test_array_len_bounded(void **state)
{
    (void)state;
    /* claims 1,000,000 int32 elements with 4 bytes left */
    static const uint8_t b[] = {0x00, 0x0f, 0x42, 0x40, 1, 2, 3, 4};
    struct gr_rd rd;
    gr_rd_init(&rd, b, sizeof b, NULL);
    gr_rd_array_len(&rd, false, false, 4);
    assert_int_equal(rd.err, GR_WIRE_BAD_LENGTH);
    static const uint8_t negative[] = {0xff, 0xff, 0xff, 0xfe};
    gr_rd_init(&rd, negative, sizeof negative, NULL);
    gr_rd_array_len(&rd, false, true, 4);
    assert_int_equal(rd.err, GR_WIRE_BAD_LENGTH);
    static const uint8_t null_arr[] = {0xff, 0xff, 0xff, 0xff};
    gr_rd_init(&rd, null_arr, sizeof null_arr, NULL);
    assert_int_equal(gr_rd_array_len(&rd, false, true, 4), -1);
    assert_int_equal(rd.err, 0);
}

static void test_sticky_error(void **state)
{
    (void)state;
    static const uint8_t b[] = {1};
    struct gr_rd rd;
    gr_rd_init(&rd, b, sizeof b, NULL);
    gr_rd_int32(&rd);
    assert_int_equal(rd.err, GR_WIRE_SHORT);
    assert_int_equal(gr_rd_int8(&rd), 0); /* nothing is read after an error */
    assert_int_equal(rd.err, GR_WIRE_SHORT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_width),       cmocka_unit_test(test_varints),
        cmocka_unit_test(test_overlong_varint),   cmocka_unit_test(test_strings),
        cmocka_unit_test(test_array_len_bounded), cmocka_unit_test(test_sticky_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
