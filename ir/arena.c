/* arena.c - bump allocator: one per model, freed at once (no per-node frees). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct mp_chunk {
    struct mp_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} mp_chunk;

struct mp_arena {
    mp_chunk *head;
    size_t total;
};

enum { MP_CHUNK_MIN = 1 << 16 };

int mp_fail(mp_err *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

mp_arena *mp_arena_new(void)
{
    mp_arena *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "memplan: out of memory\n");
        abort();
    }
    return a;
}

void mp_arena_free(mp_arena *a)
{
    if (!a) return;
    for (mp_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

void *mp_arena_alloc(mp_arena *a, size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    mp_chunk *c = a->head;
    if (!c || c->cap - c->used < bytes) {
        size_t cap = bytes > MP_CHUNK_MIN ? bytes : MP_CHUNK_MIN;
        if (c && cap < c->cap * 2 && c->cap < (64u << 20)) cap = c->cap * 2 > bytes ? c->cap * 2 : bytes;
        c = malloc(sizeof *c + cap);
        if (!c) {
            fprintf(stderr, "memplan: out of memory (arena chunk of %zu bytes)\n", cap);
            abort();
        }
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += bytes;
    a->total += bytes;
    memset(p, 0, bytes);
    return p;
}

void *mp_arena_dup(mp_arena *a, const void *p, size_t bytes)
{
    void *q = mp_arena_alloc(a, bytes ? bytes : 1);
    if (bytes) memcpy(q, p, bytes);
    return q;
}

char *mp_arena_strndup(mp_arena *a, const char *s, size_t n)
{
    char *q = mp_arena_alloc(a, n + 1);
    memcpy(q, s, n);
    q[n] = 0;
    return q;
}

char *mp_arena_strdup(mp_arena *a, const char *s) { return mp_arena_strndup(a, s ? s : "", s ? strlen(s) : 0); }

size_t mp_arena_used(const mp_arena *a) { return a->total; }
