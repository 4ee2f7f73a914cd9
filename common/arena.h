/*
 * arena.h: a per-request bump allocator. Decoded arrays and response structs live here and are freed
 * together when the request's response has been sent. Invariants: allocations are 16-byte aligned; the
 * arena never hands out more than `bytes_max` in total (the caller sizes it from the frame), so a hostile
 * array count cannot exhaust memory. Read next: protocol/wire.h.
 */
#ifndef GR_ARENA_H
#define GR_ARENA_H
#include <stddef.h>

struct gr_arena_chunk;

struct gr_arena {
    struct gr_arena_chunk *head; /* newest chunk; older chunks follow */
    size_t used_bytes;           /* total handed out */
    size_t bytes_max;            /* ceiling on used_bytes; 0 = unlimited (trusted, broker-built data) */
};

/* Initialises an empty arena that may hand out at most `bytes_max` bytes (0: no ceiling). */
void gr_arena_init(struct gr_arena *a, size_t bytes_max);
/* Returns `n` zeroed bytes owned by the arena, or NULL when the ceiling or malloc fails. */
void *gr_arena_alloc(struct gr_arena *a, size_t n);
/* Returns `count` * `size` zeroed bytes, or NULL on overflow, ceiling or malloc failure. */
void *gr_arena_calloc(struct gr_arena *a, size_t count, size_t size);
/* Returns a NUL-terminated copy of `len` bytes at `p`, or NULL. */
char *gr_arena_strndup(struct gr_arena *a, const char *p, size_t len);
/* Returns the bytes the arena holds from malloc (its chunks with their headers), >= used_bytes. */
size_t gr_arena_footprint_bytes(const struct gr_arena *a);
/* Frees every chunk; the arena is empty and reusable afterwards. */
void gr_arena_reset(struct gr_arena *a);

#endif
