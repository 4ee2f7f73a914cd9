/*
 * crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of RecordBatch v2 (bytes
 * 21..end of a batch, see record_batch.h). Two implementations compute the same function: the SSE4.2
 * `crc32` instruction (8 bytes per instruction, three independent streams interleaved so the instruction's
 * latency is hidden, streams joined with precomputed shift tables) chosen at run time when the CPU has it,
 * and a portable slicing-by-8 table fallback. Invariants: results are identical on every path; the value is
 * the standard one (init and final XOR 0xFFFFFFFF) and chains: crc(crc(0, a), b) == crc(0, a||b).
 * Read next: protocol/record_batch.c (where the batch CRC is checked).
 */
#ifndef GR_CRC32C_H
#define GR_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Returns the CRC-32C of `n` bytes at `p` continuing from `crc` (0 to start; pass a previous result to
 * chain). `p` may be NULL when `n` is 0. Uses the hardware path when available. */
uint32_t gr_crc32c(uint32_t crc, const void *p, size_t n);

/* The table (software) path, same contract as gr_crc32c; exposed so tests can compare the two paths. */
uint32_t gr_crc32c_sw(uint32_t crc, const void *p, size_t n);

/* True when gr_crc32c uses the SSE4.2 instruction on this machine. */
bool gr_crc32c_hw_available(void);

#endif
