/* arena.h - static offsets: every buffer of a schedule gets a fixed offset in
 * one arena, so that buffers live at the same time never share an address.
 *
 *   mp_arena_buf b[] = {{.lower = 0, .upper = 3, .size = 4096}, ...};   // live over [lower, upper)
 *   mp_arena_opts o = mp_arena_defaults();            // 16-byte alignment, up to 5 s of search
 *   int64_t off[n];
 *   mp_arena_result r;
 *   if (mp_arena_assign(b, n, &o, off, &r, &err)) ...
 *   printf("arena %lld, lower bound %lld (%s)\n", r.arena_bytes, r.lower_bound, mp_arena_method_names[r.method]);
 *
 * Two buffers conflict iff a.lower < b.upper && b.lower < a.upper. The arena
 * is max(offset + size); the lower bound is the largest total of sizes live at
 * one instant, which no assignment can beat. Buffers over the whole horizon
 * are stacked at the bottom first (each other buffer lies wholly above or
 * below each of them, so that loses nothing); on the rest, methods, the best
 * one kept:
 *   - by size: largest buffers first, each into the smallest gap that fits
 *     between the already placed buffers it conflicts with (TFLite, ggml);
 *   - by start: in order of lifetime start, each into the lowest gap (first fit);
 *   - by contention: size classes largest first, within a class the buffers
 *     crossing the busiest instants first, each into the lowest gap;
 *   - search: when the best heuristic exceeds the bound, a depth-first
 *     branch and bound in the style of MiniMalloc (Moffitt, ASPLOS 2023) over
 *     canonical solutions (each buffer at 0 or on top of another), placing
 *     next only at the lowest offset any buffer can take, with dominance and
 *     per-instant capacity pruning. It proves optimality when it reaches the
 *     bound or exhausts the space below the best arena; time and node limited.
 * The heuristics find the conflicting buffers with an interval sweep (a tree
 * over lifetimes sorted by start), so they cost O(n log n + conflicts log n),
 * never n^2 when lifetimes are short.
 */
#ifndef MP_ARENA_H
#define MP_ARENA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h" /* mp_err */

typedef struct mp_arena_buf {
    int64_t lower, upper;  /* live over [lower, upper); lower < upper */
    int64_t size;          /* bytes, >= 0 (a 0-byte buffer gets offset 0 and takes no room) */
    const char *name;      /* for messages; NULL: "buffer INDEX" */
} mp_arena_buf;

typedef enum mp_arena_method {
    MP_ARENA_BY_SIZE = 0,
    MP_ARENA_BY_START,
    MP_ARENA_BY_CONTENTION,
    MP_ARENA_SEARCH,
    MP_ARENA_METHOD_COUNT
} mp_arena_method;

/* "by-size", "by-start", "by-contention", "search" */
extern const char *const mp_arena_method_names[MP_ARENA_METHOD_COUNT];

typedef struct mp_arena_opts {
    int64_t alignment;          /* every offset a multiple of it, sizes padded to it; >= 1 (default 16) */
    double time_limit;          /* seconds of search in all; 0 = heuristics only (default 5; it stops at the bound) */
    int64_t node_limit;         /* search nodes in all; 0 = no limit (default 0) */
    int64_t work_limit;         /* search work in all, in buffers visited; 0 = no limit (default 0). Unlike time it
                                 * is the same on every run: with it (or node_limit) an instance is placed alike
                                 * under any load */
    int32_t search_max_buffers; /* time-disjoint parts with more buffers are not searched (default 3000) */
    int32_t sweep_max_buffers;  /* the greedy by size sweeps every placed buffer up to this many buffers, else
                                 * collects each one's conflicts in a tree: the same offsets (default 4096;
                                 * 0: always the tree, the tests' reference) */
    int64_t target;             /* an arena the caller needs, bytes (0: none): the search tries it first, stops
                                 * once it fits it within 1 % of the bound, and by half of time_limit once it
                                 * fits it at all */
    bool target_only;           /* only an arena within target serves the caller: once a search for it fails,
                                 * or the bound puts it out of reach, the search ends (the best arena so far is
                                 * returned) */
    const atomic_bool *cancel;  /* NULL, or set by another thread when it no longer needs the result: the
                                 * search stops at once (the heuristics' best is returned) */
} mp_arena_opts;

mp_arena_opts mp_arena_defaults(void);

typedef struct mp_arena_result {
    int64_t arena_bytes;                          /* max(offset + size), 0 when no buffer */
    int64_t lower_bound;                          /* largest total bytes live at one instant */
    int64_t aligned_bound;                        /* the same with sizes padded to the alignment */
    int64_t method_bytes[MP_ARENA_METHOD_COUNT];  /* arena each method reached; -1 when not run or no gain */
    mp_arena_method method;                       /* the one whose offsets are returned */
    bool optimal;         /* proven: no aligned assignment of the padded sizes needs a smaller arena */
    int64_t nodes;        /* search nodes visited */
    int32_t parts;        /* time-disjoint parts (no buffer lives across their boundaries) */
} mp_arena_result;

/* Writes n offsets. Fails on a bad buffer (empty lifetime, negative size),
 * bad options or sizes that overflow; never on a hard instance (the search
 * only stops early). */
int mp_arena_assign(const mp_arena_buf *bufs, int32_t n, const mp_arena_opts *o, int64_t *offsets,
                    mp_arena_result *r, mp_err *err);

#endif
