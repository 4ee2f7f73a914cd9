/* arena.c: chunked bump allocator; see arena.h. Chunks grow to fit large requests. */
#include "common/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK_BYTES 8192

struct gr_arena_chunk {
    struct gr_arena_chunk *next;
    size_t cap, off;
    _Alignas(16) unsigned char data[];
};

void gr_arena_init(struct gr_arena *a, size_t bytes_max)
{
    a->head = NULL;
    a->used_bytes = 0;
    a->bytes_max = bytes_max;
}

void *gr_arena_alloc(struct gr_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->bytes_max && (n > a->bytes_max || a->used_bytes > a->bytes_max - n)) return NULL;
    struct gr_arena_chunk *c = a->head;
    if (!c || c->cap - c->off < n) {
        size_t cap = n > ARENA_CHUNK_BYTES ? n : ARENA_CHUNK_BYTES;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->off = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->off;
    c->off += n;
    a->used_bytes += n;
    memset(p, 0, n);
    return p;
}

void *gr_arena_calloc(struct gr_arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    return gr_arena_alloc(a, count * size);
}

char *gr_arena_strndup(struct gr_arena *a, const char *p, size_t len)
{
    char *s = gr_arena_alloc(a, len + 1);
    if (!s) return NULL;
    memcpy(s, p, len);
    s[len] = 0;
    return s;
}

size_t gr_arena_footprint_bytes(const struct gr_arena *a)
{
    size_t bytes = 0;
    for (const struct gr_arena_chunk *c = a->head; c; c = c->next)
        bytes += sizeof *c + c->cap;
    return bytes;
}

void gr_arena_reset(struct gr_arena *a)
{
    struct gr_arena_chunk *c = a->head;
    while (c) {
        struct gr_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}
