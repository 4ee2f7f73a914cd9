/*
 * support.h: test-only helpers for the codec tests: a growable string builder with JSON writers that
 * mirror Kafka's JsonConverter output (bytes/records as standard base64, uuids as Kafka's Uuid.toString(),
 * url-safe base64 without padding), and a small deterministic random generator (xorshift64*).
 */
#ifndef GR_TEST_SUPPORT_H
#define GR_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "protocol/wire.h"

struct gr_sb {
    char *buf;
    size_t len, cap;
};
void gr_sb_init(struct gr_sb *sb);
void gr_sb_free(struct gr_sb *sb);
void gr_sb_putc(struct gr_sb *sb, char c);
void gr_sb_puts(struct gr_sb *sb, const char *s);
void gr_sb_printf(struct gr_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes `"key":` preceded by a comma unless *first; clears *first. */
void gr_sb_json_key(struct gr_sb *sb, const char *key, bool *first);
void gr_sb_json_bool(struct gr_sb *sb, bool v);
void gr_sb_json_int(struct gr_sb *sb, int64_t v);
void gr_sb_json_double(struct gr_sb *sb, double v);
void gr_sb_json_str(struct gr_sb *sb, struct gr_str s);
void gr_sb_json_bytes(struct gr_sb *sb, struct gr_bytes b);
void gr_sb_json_records(struct gr_sb *sb, struct gr_records r);
void gr_sb_json_uuid(struct gr_sb *sb, struct gr_uuid u);

struct gr_rng {
    uint64_t s;
};
void gr_rng_seed(struct gr_rng *rng, uint64_t seed);
uint64_t gr_rng_u64(struct gr_rng *rng);
/* Uniform in [0, n). */
uint32_t gr_rng_below(struct gr_rng *rng, uint32_t n);
bool gr_rng_bool(struct gr_rng *rng);
/* Integers biased towards edge values (0, -1, min, max) a fifth of the time. */
int32_t gr_rng_int32(struct gr_rng *rng);
int64_t gr_rng_int64(struct gr_rng *rng);
double gr_rng_double(struct gr_rng *rng);
struct gr_uuid gr_rng_uuid(struct gr_rng *rng);
/* Random strings (some non-ASCII UTF-8) and bytes from the arena; null sometimes when `nullable`. */
struct gr_str gr_rng_str(struct gr_rng *rng, struct gr_arena *a, bool nullable);
struct gr_bytes gr_rng_bytes(struct gr_rng *rng, struct gr_arena *a, bool nullable);
/* One to three unknown tagged fields with tags >= 10000, ascending. */
void gr_rng_unknown_tags(struct gr_rng *rng, struct gr_arena *a, struct gr_tags *t);

/* Hex helpers: returns bytes written, or -1 on a bad digit / odd length. */
long gr_hex_decode(const char *hex, size_t hex_len, uint8_t *out);
void gr_sb_hex(struct gr_sb *sb, const uint8_t *p, size_t n);

#endif
