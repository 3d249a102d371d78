/* half.c - 16-bit floats (IEEE binary16 and bfloat16) to and from fp32:
 * widening is exact; rounding is round-to-nearest-even, float16 with
 * subnormals and overflow to inf; NaN stays NaN (quiet, sign and top payload
 * bits kept). The tensor accessors (graph.c), Cast and the executor's
 * 16-bit arithmetic (runtime/) all round here. */
#include <string.h>

#include "ir/ir.h"

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

float mp_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

float mp_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 31) return bits_f32(s | 0x7f800000u | (m << 13)); /* inf, NaN (payload kept) */
    if (e) return bits_f32(s | ((e + 127 - 15) << 23) | (m << 13));
    /* zero or subnormal: m * 2^-24, exact in fp32 */
    float v = (float)m * 0x1p-24f;
    return s ? -v : v;
}

uint16_t mp_f32_to_bf16(float f)
{
    uint32_t b = f32_bits(f);
    /* NaN: keep sign and the top of the payload, set the quiet bit (adding the
     * rounding bias could carry a NaN into inf) */
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40);
    /* the same exponent range as fp32: round the low 16 bits away (ties to
     * even); a carry out of the mantissa moves to the next binade or to inf */
    b += 0x7fffu + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

/* Rounds q + rem / 2^shift to an integer, ties to even. */
static uint32_t rne(uint32_t q, uint32_t rem, int shift)
{
    uint32_t half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

uint16_t mp_f32_to_f16(float f)
{
    uint32_t b = f32_bits(f), s = (b >> 16) & 0x8000, a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00 | ((a >> 13) & 0x3ff)); /* NaN, quiet */
    if (a >= 0x47800000u) return (uint16_t)(s | 0x7c00);                      /* >= 2^16: inf */
    if (a >= 0x38800000u) {
        /* normal (>= 2^-14): rebias the exponent by 127 - 15, drop 13 mantissa
         * bits; [65520, 65536) carries into 0x7c00, inf, as it must */
        uint32_t r = a - 0x38000000u;
        return (uint16_t)(s | rne(r >> 13, r & 0x1fff, 13));
    }
    /* below 2^-14: a subnormal k * 2^-24 (k may round up to 0x400, the least
     * normal, whose bits are the same integer) or zero */
    uint32_t e = a >> 23;
    if (e < 102) return (uint16_t)s; /* < 2^-25: rounds to zero */
    uint32_t m = (a & 0x7fffff) | 0x800000; /* value = m * 2^(e - 150) */
    int shift = 126 - (int)e;               /* 14..24 */
    return (uint16_t)(s | rne(m >> shift, m & ((1u << shift) - 1), shift));
}

