/* dtype.c - the element type table (ONNX TensorProto.DataType numbering). */
#include "ir.h"

static const struct {
    const char *name;
    int bits;
    bool is_float, is_int;
} dtype_table[MP_DTYPE_COUNT] = {
    [MP_UNDEFINED] = {"?", 0, false, false},
    [MP_FLOAT] = {"float32", 32, true, false},
    [MP_UINT8] = {"uint8", 8, false, true},
    [MP_INT8] = {"int8", 8, false, true},
    [MP_UINT16] = {"uint16", 16, false, true},
    [MP_INT16] = {"int16", 16, false, true},
    [MP_INT32] = {"int32", 32, false, true},
    [MP_INT64] = {"int64", 64, false, true},
    [MP_STRING] = {"string", 0, false, false},
    [MP_BOOL] = {"bool", 8, false, false},
    [MP_FLOAT16] = {"float16", 16, true, false},
    [MP_DOUBLE] = {"float64", 64, true, false},
    [MP_UINT32] = {"uint32", 32, false, true},
    [MP_UINT64] = {"uint64", 64, false, true},
    [MP_COMPLEX64] = {"complex64", 64, false, false},
    [MP_COMPLEX128] = {"complex128", 128, false, false},
    [MP_BFLOAT16] = {"bfloat16", 16, true, false},
    [MP_FLOAT8E4M3FN] = {"float8e4m3fn", 8, true, false},
    [MP_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 8, true, false},
    [MP_FLOAT8E5M2] = {"float8e5m2", 8, true, false},
    [MP_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 8, true, false},
    [MP_UINT4] = {"uint4", 4, false, true},
    [MP_INT4] = {"int4", 4, false, true},
    [MP_FLOAT4E2M1] = {"float4e2m1", 4, true, false},
    [MP_FLOAT8E8M0] = {"float8e8m0", 8, true, false},
    [MP_UINT2] = {"uint2", 2, false, true},
    [MP_INT2] = {"int2", 2, false, true},
};

bool mp_dtype_valid(int t) { return t > MP_UNDEFINED && t < MP_DTYPE_COUNT; }
const char *mp_dtype_name(mp_dtype t) { return mp_dtype_valid(t) ? dtype_table[t].name : "?"; }
int mp_dtype_bits(mp_dtype t) { return mp_dtype_valid(t) ? dtype_table[t].bits : 0; }
bool mp_dtype_is_float(mp_dtype t) { return mp_dtype_valid(t) && dtype_table[t].is_float; }
bool mp_dtype_is_int(mp_dtype t) { return mp_dtype_valid(t) && dtype_table[t].is_int; }
bool mp_dtype_is_half(mp_dtype t) { return t == MP_FLOAT16 || t == MP_BFLOAT16; }

size_t mp_elem_size(mp_dtype t)
{
    if (t == MP_STRING) return 0;
    int bits = mp_dtype_bits(t);
    return bits % 8 ? 0 : (size_t)bits / 8;
}

int64_t mp_dtype_bytes(mp_dtype t, int64_t n)
{
    int bits = mp_dtype_bits(t);
    if (t == MP_STRING) bits = 8 * (int)sizeof(char *); /* planning counts a pointer per string */
    if (bits == 0 || n < 0) return -1;
    int64_t b;
    if (!mp_mul_ok(n, bits, &b)) return -1;
    return (b + 7) / 8;
}
