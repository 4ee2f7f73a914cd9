/*
 * test_crc32c.c: CRC-32C against published check values (RFC 3720 appendix B.4 and the standard
 * "123456789" check), the hardware path against the table path at every length 0..300 and every
 * alignment, large buffers that take the three-way interleaved loop, and chaining.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/crc32c.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint8_t rnd8(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 24);
}

static void test_known_vectors(void **state)
{
    (void)state;
    uint8_t buf[32];
    assert_int_equal(gr_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(gr_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    memset(buf, 0, sizeof buf);
    assert_int_equal(gr_crc32c(0, buf, 32), 0x8A9136AAu);
    assert_int_equal(gr_crc32c_sw(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, sizeof buf);
    assert_int_equal(gr_crc32c(0, buf, 32), 0x62A8AB43u);
    assert_int_equal(gr_crc32c_sw(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(gr_crc32c(0, buf, 32), 0x46DD794Eu);
    assert_int_equal(gr_crc32c_sw(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    assert_int_equal(gr_crc32c(0, buf, 32), 0x113FDB5Cu); /* RFC 3720 B.4, descending */
    assert_int_equal(gr_crc32c(0, NULL, 0), 0u);
    assert_int_equal(gr_crc32c(0x12345678u, NULL, 0), 0x12345678u);
}

static void test_hw_matches_table_all_lengths_and_alignments(void **state)
{
    (void)state;
    uint8_t buf[300 + 16];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = rnd8();
    for (size_t align = 0; align < 8; align++)
        for (size_t len = 0; len <= 300; len++) {
            uint32_t hw = gr_crc32c(0, buf + align, len);
            uint32_t sw = gr_crc32c_sw(0, buf + align, len);
            if (hw != sw) fail_msg("align %zu len %zu: hw %08x sw %08x", align, len, hw, sw);
        }
}

static void test_large_buffers_and_chaining(void **state)
{
    (void)state;
    /* Lengths around the 3 x 8192 and 3 x 256 block boundaries of the interleaved loop. */
    static const size_t lens[] = {767, 768, 769, 24575, 24576, 24577, 49152 + 768 + 7, 100003, 1 << 20};
    size_t max = 1 << 20;
    uint8_t *buf = malloc(max + 8);
    assert_non_null(buf);
    for (size_t i = 0; i < max + 8; i++)
        buf[i] = rnd8();
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
        for (size_t align = 0; align < 8; align += 3) {
            uint32_t whole = gr_crc32c(0, buf + align, lens[k]);
            assert_int_equal(whole, gr_crc32c_sw(0, buf + align, lens[k]));
            /* Chaining: any split gives the same value, on both paths. */
            size_t cut = lens[k] / 3 + align;
            uint32_t part = gr_crc32c(0, buf + align, cut);
            assert_int_equal(gr_crc32c(part, buf + align + cut, lens[k] - cut), whole);
            part = gr_crc32c_sw(0, buf + align, cut);
            assert_int_equal(gr_crc32c_sw(part, buf + align + cut, lens[k] - cut), whole);
        }
    free(buf);
}

static void test_report_path(void **state)
{
    (void)state;
    /* This machine's path is printed so a run on a CPU without SSE4.2 is visible in the log. */
    print_message("crc32c hardware path: %s\n", gr_crc32c_hw_available() ? "yes" : "no");
    assert_int_equal(gr_crc32c(0, "a", 1), 0xC1D04330u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_hw_matches_table_all_lengths_and_alignments),
        cmocka_unit_test(test_large_buffers_and_chaining),
        cmocka_unit_test(test_report_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
