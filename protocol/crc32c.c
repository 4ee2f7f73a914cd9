/*
 * crc32c.c: CRC-32C, hardware and table paths (see crc32c.h for the contract).
 *
 * Arithmetic: the CRC register is a polynomial over GF(2) in reflected form (bit 31 is x^0, bit 0 is
 * x^31), reduced modulo P = 0x82F63B78 (reflected Castagnoli). Without the initial and final inversion the
 * update is linear, so the register after A||B equals (register after A) * x^(8*|B|) mod P XOR (register of
 * B alone started from 0). The hardware path uses that identity to run three streams at once: a block of
 * 3*L bytes is split into three L-byte parts whose registers are computed independently (the crc32
 * instruction has a 3-cycle latency but issues every cycle) and joined with two multiplications by
 * x^(8L), done with four 256-entry tables per block size.
 *
 * Tables are built once, on first use (pthread_once). Read next: protocol/record_batch.c.
 */
#include "protocol/crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u
/* Bytes per stream in the three-way hardware loop: long for big buffers, short for the remainder. */
#define CRC32C_LONG_BYTES 8192
#define CRC32C_SHORT_BYTES 256

static uint32_t crc_table[8][256];   /* slicing-by-8 tables */
static uint32_t shift_long[4][256];  /* register * x^(8 * CRC32C_LONG_BYTES), by byte of register */
static uint32_t shift_short[4][256]; /* register * x^(8 * CRC32C_SHORT_BYTES) */
static bool hw_available;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* a * b mod P, both in reflected form. */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t prod = 0;
    for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
        if (a & m) prod ^= b;
        b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return prod;
}

/* x^(8n) mod P, by square and multiply. */
static uint32_t gf2_x_pow_8n(size_t n)
{
    uint32_t result = 1u << 31; /* x^0 */
    uint32_t base = 1u << 23;   /* x^8 */
    while (n) {
        if (n & 1) result = gf2_mul(base, result);
        base = gf2_mul(base, base);
        n >>= 1;
    }
    return result;
}

static void build_shift_table(uint32_t table[4][256], size_t len_bytes)
{
    uint32_t xn = gf2_x_pow_8n(len_bytes);
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            table[k][b] = gf2_mul(xn, b << (8 * k));
}

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int j = 0; j < 8; j++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xff];
    build_shift_table(shift_long, CRC32C_LONG_BYTES);
    build_shift_table(shift_short, CRC32C_SHORT_BYTES);
#if defined(__x86_64__)
    __builtin_cpu_init();
    hw_available = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint32_t lo = load_le32(p) ^ c;
        uint32_t hi = load_le32(p + 4);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__)
static inline uint32_t shift(const uint32_t table[4][256], uint32_t c)
{
    return table[0][c & 0xff] ^ table[1][(c >> 8) & 0xff] ^ table[2][(c >> 16) & 0xff] ^ table[3][c >> 24];
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Runs three streams of `len_bytes` each over `p` (3 * len_bytes bytes) and joins them into `c`. */
__attribute__((target("sse4.2"))) static inline uint64_t
crc_hw_3way(uint64_t c, const uint8_t *p, size_t len_bytes, const uint32_t table[4][256])
{
    uint64_t c1 = 0, c2 = 0;
    const uint8_t *end = p + len_bytes;
    do {
        c = __builtin_ia32_crc32di(c, load64(p));
        c1 = __builtin_ia32_crc32di(c1, load64(p + len_bytes));
        c2 = __builtin_ia32_crc32di(c2, load64(p + 2 * len_bytes));
        p += 8;
    } while (p < end);
    c = shift(table, (uint32_t)c) ^ (uint32_t)c1;
    return shift(table, (uint32_t)c) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = (uint32_t)~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    while (n >= 3 * CRC32C_LONG_BYTES) {
        c = crc_hw_3way(c, p, CRC32C_LONG_BYTES, shift_long);
        p += 3 * CRC32C_LONG_BYTES;
        n -= 3 * CRC32C_LONG_BYTES;
    }
    while (n >= 3 * CRC32C_SHORT_BYTES) {
        c = crc_hw_3way(c, p, CRC32C_SHORT_BYTES, shift_short);
        p += 3 * CRC32C_SHORT_BYTES;
        n -= 3 * CRC32C_SHORT_BYTES;
    }
    while (n >= 8) {
        c = __builtin_ia32_crc32di(c, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

uint32_t gr_crc32c(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (hw_available) return crc_hw(crc, p, n);
#endif
    return crc_sw(crc, p, n);
}

uint32_t gr_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    return crc_sw(crc, p, n);
}

bool gr_crc32c_hw_available(void)
{
    pthread_once(&crc_once, crc_init);
    return hw_available;
}
