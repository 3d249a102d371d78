/* offsets_verify.h - checks a static offset assignment, independently of the
 * code that made it (passes/arena.c): a plan is only trusted once this passes.
 *
 *   if (mp_offsets_verify(bufs, n, offsets, arena_bytes, budget, &err)) puts(err.msg);
 *
 * Fails, with one line naming the buffers, when two buffers whose lifetimes
 * overlap share an address, when a buffer is not inside [0, arena_size), when
 * the arena exceeds the budget (budget < 0: no budget), or on a malformed
 * buffer. A sweep over lifetimes with the live buffers in an ordered set by
 * offset: O(n log n), each buffer only checked against its neighbours in
 * address among the buffers live with it. 0-byte buffers take no room.
 */
#ifndef MP_OFFSETS_VERIFY_H
#define MP_OFFSETS_VERIFY_H

#include <stdint.h>

#include "ir/ir.h"         /* mp_err */
#include "passes/arena.h"  /* mp_arena_buf (the type only) */

int mp_offsets_verify(const mp_arena_buf *bufs, int32_t n, const int64_t *offsets, int64_t arena_size,
                      int64_t budget, mp_err *err);

#endif
