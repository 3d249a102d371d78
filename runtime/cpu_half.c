/* cpu_half.c - 16-bit float arrays (IEEE binary16 and bfloat16) widened to
 * fp32 and rounded back, with ir/half.c's conversions (round-to-nearest-even,
 * as GPU tensor cores round their fp32 accumulators). The executor widens a
 * node's 16-bit inputs and rounds its outputs with these (exec.c). */

#include "kernels.h"

void mp_half_widen(mp_dtype t, const uint16_t *src, float *dst, int64_t n)
{
    if (t == MP_BFLOAT16)
        for (int64_t i = 0; i < n; i++) dst[i] = mp_bf16_to_f32(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = mp_f16_to_f32(src[i]);
}

void mp_half_round(mp_dtype t, const float *src, uint16_t *dst, int64_t n)
{
    if (t == MP_BFLOAT16)
        for (int64_t i = 0; i < n; i++) dst[i] = mp_f32_to_bf16(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = mp_f32_to_f16(src[i]);
}
