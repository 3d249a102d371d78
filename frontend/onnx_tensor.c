/* onnx_tensor.c - TensorProto / SparseTensorProto: checks (dtype, dims,
 * payload size), where the bytes are (mp_data_ref), and decoding into
 * mp_tensor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx.h"
#include "frontend/wire.h"
#include "ir/ops.h"   /* defines: MP_FOLD_MAX_ELEMS */
#include "onnx.pb-c.h"

/* The payload fields of a TensorProto, in the order messages name them. */
enum { F_FLOAT = 4, F_INT32 = 5, F_STRING = 6, F_INT64 = 7, F_RAW = 9, F_DOUBLE = 10, F_UINT64 = 11 };
static const struct {
    int field;
    const char *name;
} payload_fields[] = {
    {F_RAW, "raw_data"},     {F_FLOAT, "float_data"},   {F_INT32, "int32_data"},   {F_STRING, "string_data"},
    {F_INT64, "int64_data"}, {F_DOUBLE, "double_data"}, {F_UINT64, "uint64_data"},
};
enum { NPAYLOAD = sizeof payload_fields / sizeof payload_fields[0] };

/* 2- and 4-bit types: packed 8 / bits elements per byte, low bits first. */
static int sub_byte_per_byte(mp_dtype t)
{
    int bits = mp_dtype_bits(t);
    return bits > 0 && bits < 8 ? 8 / bits : 0;
}

/* Element i of a sub-byte tensor whose packed byte is `byte`: one element per
 * output byte, sign-extended for int4 and int2. */
static uint8_t sub_byte_get(mp_dtype t, uint32_t byte, int64_t i)
{
    int bits = mp_dtype_bits(t), per = 8 / bits;
    uint32_t v = (byte >> (bits * (int)(i % per))) & ((1u << bits) - 1);
    if ((t == MP_INT4 || t == MP_INT2) && (v >> (bits - 1))) v |= ~0u << bits;
    return (uint8_t)v;
}

/* Values a typed field holds for n elements of t; -1 when it cannot hold t. */
static int64_t typed_count(int field, mp_dtype t, int64_t n)
{
    switch (field) {
    case F_FLOAT: return t == MP_FLOAT ? n : t == MP_COMPLEX64 ? 2 * n : -1;
    case F_DOUBLE: return t == MP_DOUBLE ? n : t == MP_COMPLEX128 ? 2 * n : -1;
    case F_INT64: return t == MP_INT64 ? n : -1;
    case F_UINT64: return t == MP_UINT32 || t == MP_UINT64 ? n : -1;
    case F_STRING: return t == MP_STRING ? n : -1;
    case F_INT32: {
        int per = sub_byte_per_byte(t);
        if (per) return n / per + (n % per != 0); /* one packed byte per value, as in raw_data */
        if (t == MP_INT32 || t == MP_INT16 || t == MP_INT8 || t == MP_UINT16 || t == MP_UINT8 || t == MP_BOOL ||
            t == MP_FLOAT16 || t == MP_BFLOAT16 || (t >= MP_FLOAT8E4M3FN && t <= MP_FLOAT8E5M2FNUZ) ||
            t == MP_FLOAT8E8M0)
            return n;
        return -1;
    }
    default: return -1;
    }
}

/* Values in the struct's field, or -1 when absent. */
static int64_t struct_count(const Onnx__TensorProto *tp, int field)
{
    size_t n;
    switch (field) {
    case F_RAW: return tp->has_raw_data ? (int64_t)tp->raw_data.len : -1;
    case F_FLOAT: n = tp->n_float_data; break;
    case F_INT32: n = tp->n_int32_data; break;
    case F_STRING: n = tp->n_string_data; break;
    case F_INT64: n = tp->n_int64_data; break;
    case F_DOUBLE: n = tp->n_double_data; break;
    case F_UINT64: n = tp->n_uint64_data; break;
    default: return -1;
    }
    return n ? (int64_t)n : -1;
}

static const char *type_str(const Onnx__TensorProto *tp, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", mp_dtype_name((mp_dtype)tp->data_type));
    for (size_t i = 0; i < tp->n_dims && k + 24 < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)tp->dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* A non-negative decimal integer, as external_data writes offset and length. */
static int parse_size(const char *s, int64_t *out)
{
    if (!s || !*s) return -1;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (!mp_mul_ok(v, 10, &v) || !mp_add_ok(v, *s - '0', &v)) return -1;
    }
    *out = v;
    return 0;
}

static int check_external(const Onnx__TensorProto *tp, const char *what, int64_t bytes, mp_data_ref *ref,
                          mp_arena *a, mp_err *err)
{
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const char *k = tp->external_data[i]->key ? tp->external_data[i]->key : "";
        const char *v = tp->external_data[i]->value ? tp->external_data[i]->value : "";
        if (!strcmp(k, "location")) {
            loc = v;
        } else if (!strcmp(k, "offset")) {
            if (parse_size(v, &off)) return mp_fail(err, "%s: external data offset '%.40s' is not a byte count", what, v);
        } else if (!strcmp(k, "length")) {
            if (parse_size(v, &len)) return mp_fail(err, "%s: external data length '%.40s' is not a byte count", what, v);
        }
    }
    if (!loc || !*loc) return mp_fail(err, "%s: external data has no location", what);
    if (tp->data_type == MP_STRING) return mp_fail(err, "%s: string tensors cannot use external data", what);
    if (len >= 0 && len != bytes) {
        char t[128];
        return mp_fail(err, "%s: external data length %lld does not match %s (%lld bytes)", what, (long long)len,
                       type_str(tp, t, sizeof t), (long long)bytes);
    }
    ref->kind = MP_DATA_EXTERNAL;
    ref->location = mp_arena_strdup(a, loc);
    ref->offset = off;
    ref->length = bytes;
    return 0;
}

int mp_onnx_tensor_check(const Onnx__TensorProto *tp, const mp_onnx_payload *pl, const char *what, mp_data_ref *ref,
                         int64_t *numel, mp_arena *a, mp_err *err)
{
    char t[128];
    memset(ref, 0, sizeof *ref);
    if (!tp->has_data_type || tp->data_type == MP_UNDEFINED) return mp_fail(err, "%s has no data type", what);
    if (!mp_dtype_valid(tp->data_type)) return mp_fail(err, "%s has unknown data type %d", what, tp->data_type);
    mp_dtype dt = (mp_dtype)tp->data_type;
    if (tp->n_dims > MP_MAX_RANK)
        return mp_fail(err, "%s has rank %zu (limit %d)", what, tp->n_dims, MP_MAX_RANK);
    int64_t n = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return mp_fail(err, "%s has a negative dimension %lld (dims[%zu])", what, (long long)tp->dims[i], i);
        if (!mp_mul_ok(n, tp->dims[i], &n))
            return mp_fail(err, "%s has dims whose product overflows int64 (%s)", what, type_str(tp, t, sizeof t));
    }
    int64_t bytes = mp_dtype_bytes(dt, n);
    if (bytes < 0) return mp_fail(err, "%s is too large to address (%s)", what, type_str(tp, t, sizeof t));
    *numel = n;

    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return check_external(tp, what, bytes, ref, a, err);
    if (tp->has_data_location && tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT)
        return mp_fail(err, "%s has unknown data_location %d", what, (int)tp->data_location);

    int found = -1;
    int64_t count = 0;
    for (int k = 0; k < NPAYLOAD; k++) {
        int f = payload_fields[k].field;
        int64_t c = struct_count(tp, f);
        if (pl && pl->field == f) c = (c < 0 ? 0 : c) + (f == F_RAW ? pl->length : pl->count);
        if (c < 0) continue;
        if (found >= 0)
            return mp_fail(err, "%s stores its data in both %s and %s", what, payload_fields[found].name,
                           payload_fields[k].name);
        found = k;
        count = c;
    }
    if (found < 0) {
        if (n > 0) return mp_fail(err, "%s has no data (%s needs %lld elements)", what, type_str(tp, t, sizeof t), (long long)n);
        return 0;
    }
    int f = payload_fields[found].field;
    if (f == F_RAW) {
        if (dt == MP_STRING) return mp_fail(err, "%s is a string tensor with raw_data (strings need string_data)", what);
        if (count != bytes)
            return mp_fail(err, "%s: raw_data holds %lld bytes, but %s needs %lld", what, (long long)count,
                           type_str(tp, t, sizeof t), (long long)bytes);
    } else {
        int64_t want = typed_count(f, dt, n);
        if (want < 0) return mp_fail(err, "%s: %s cannot hold %s elements", what, payload_fields[found].name, mp_dtype_name(dt));
        if (count != want)
            return mp_fail(err, "%s: %s holds %lld values, but %s needs %lld", what, payload_fields[found].name,
                           (long long)count, type_str(tp, t, sizeof t), (long long)want);
    }
    if (pl && pl->field == f) {
        ref->kind = f == F_RAW ? MP_DATA_RAW : MP_DATA_TYPED;
        ref->field = f == F_RAW ? 0 : f;
        ref->offset = pl->offset;
        ref->length = pl->length;
    } else {
        ref->kind = MP_DATA_INLINE;
    }
    return 0;
}

static size_t elem_size(mp_dtype t) { return t == MP_STRING ? sizeof(char *) : (size_t)(mp_dtype_bits(t) + 7) / 8; }

/* A tensor of known dims; data zeroed when with_data (one element per byte for 2- and 4-bit types). */
static mp_tensor *tensor_alloc(mp_arena *a, mp_dtype t, int rank, const int64_t *dims, bool with_data)
{
    mp_tensor *x = mp_arena_alloc(a, sizeof *x);
    x->dtype = t;
    x->rank = rank;
    x->dims = mp_arena_alloc(a, (size_t)(rank ? rank : 1) * sizeof *x->dims);
    x->numel = 1;
    for (int i = 0; i < rank; i++) {
        x->dims[i] = dims[i];
        x->numel *= dims[i]; /* callers checked the product */
    }
    if (with_data) x->data = mp_arena_alloc(a, (size_t)x->numel * elem_size(t) + 1);
    return x;
}

static void decode_int32(mp_tensor *x, const int32_t *v)
{
    uint8_t *b = x->data;
    int per = sub_byte_per_byte(x->dtype);
    for (int64_t i = 0; i < x->numel; i++) {
        if (per) {
            b[i] = sub_byte_get(x->dtype, (uint32_t)v[i / per], i);
            continue;
        }
        switch (x->dtype) {
        case MP_INT32: ((int32_t *)x->data)[i] = v[i]; break;
        case MP_FLOAT16:
        case MP_BFLOAT16:
        case MP_UINT16: ((uint16_t *)x->data)[i] = (uint16_t)v[i]; break;
        case MP_INT16: ((int16_t *)x->data)[i] = (int16_t)v[i]; break;
        case MP_BOOL: b[i] = v[i] != 0; break;
        default: b[i] = (uint8_t)v[i]; break; /* int8, uint8, float8 bits */
        }
    }
}

mp_tensor *mp_onnx_tensor_decode(mp_arena *a, const Onnx__TensorProto *tp, bool want_data)
{
    mp_dtype t = (mp_dtype)tp->data_type;
    int rank = (int)tp->n_dims;
    bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    mp_tensor *x = tensor_alloc(a, t, rank, tp->dims, false);
    bool inline_data = tp->has_raw_data || tp->n_float_data || tp->n_int32_data || tp->n_string_data ||
                       tp->n_int64_data || tp->n_double_data || tp->n_uint64_data;
    if (!want_data || external || (!inline_data && x->numel)) return x;
    x->data = mp_arena_alloc(a, (size_t)x->numel * elem_size(t) + 1);
    size_t bytes = (size_t)x->numel * elem_size(t);
    uint8_t *b = x->data;
    if (tp->has_raw_data) {
        const uint8_t *r = tp->raw_data.data;
        int per = sub_byte_per_byte(t);
        if (per) { /* raw_data holds ceil(numel / per) bytes, as the check verified */
            for (int64_t i = 0; i < x->numel; i++) b[i] = sub_byte_get(t, r[i / per], i);
        } else if (bytes) {
            memcpy(b, r, bytes);
        }
    } else if (tp->n_float_data) {
        memcpy(b, tp->float_data, tp->n_float_data * sizeof(float));
    } else if (tp->n_double_data) {
        memcpy(b, tp->double_data, tp->n_double_data * sizeof(double));
    } else if (tp->n_int64_data) {
        memcpy(b, tp->int64_data, tp->n_int64_data * sizeof(int64_t));
    } else if (tp->n_uint64_data) {
        for (int64_t i = 0; i < x->numel; i++) {
            if (t == MP_UINT32)
                ((uint32_t *)x->data)[i] = (uint32_t)tp->uint64_data[i];
            else
                ((uint64_t *)x->data)[i] = tp->uint64_data[i];
        }
    } else if (tp->n_int32_data) {
        decode_int32(x, tp->int32_data);
    } else if (tp->n_string_data) {
        const char **s = x->data;
        for (int64_t i = 0; i < x->numel; i++)
            s[i] = tp->string_data[i].len ? mp_arena_strndup(a, (const char *)tp->string_data[i].data, tp->string_data[i].len)
                                          : "";
    }
    return x;
}

/* ---- sparse tensors: densified ------------------------------------------ */

mp_tensor *mp_onnx_sparse_decode(mp_arena *a, const Onnx__SparseTensorProto *sp, bool want_data, const char *what,
                                 mp_err *err)
{
    char sub[160];
    mp_data_ref ref;
    int64_t nnz, nidx, numel = 1;
    if (!sp->values) {
        mp_fail(err, "%s: sparse tensor has no values", what);
        return NULL;
    }
    snprintf(sub, sizeof sub, "%s (values)", what);
    if (mp_onnx_tensor_check(sp->values, NULL, sub, &ref, &nnz, a, err)) return NULL;
    if (sp->values->n_dims != 1) {
        mp_fail(err, "%s: sparse values must be 1-D, not rank %zu", what, sp->values->n_dims);
        return NULL;
    }
    if (sp->n_dims > MP_MAX_RANK) {
        mp_fail(err, "%s has rank %zu (limit %d)", what, sp->n_dims, MP_MAX_RANK);
        return NULL;
    }
    for (size_t i = 0; i < sp->n_dims; i++) {
        if (sp->dims[i] < 0) {
            mp_fail(err, "%s has a negative dimension %lld (dims[%zu])", what, (long long)sp->dims[i], i);
            return NULL;
        }
        if (!mp_mul_ok(numel, sp->dims[i], &numel) || mp_dtype_bytes((mp_dtype)sp->values->data_type, numel) < 0) {
            mp_fail(err, "%s has dims whose product overflows int64", what);
            return NULL;
        }
    }
    int rank = (int)sp->n_dims;
    mp_tensor *values = mp_onnx_tensor_decode(a, sp->values, true);
    mp_tensor *indices = NULL;
    if (nnz > 0) {
        if (!sp->indices) {
            mp_fail(err, "%s: sparse tensor has values but no indices", what);
            return NULL;
        }
        snprintf(sub, sizeof sub, "%s (indices)", what);
        if (mp_onnx_tensor_check(sp->indices, NULL, sub, &ref, &nidx, a, err)) return NULL;
        bool linear = sp->indices->n_dims == 1 && sp->indices->dims[0] == nnz;
        bool coords = sp->indices->n_dims == 2 && sp->indices->dims[0] == nnz && sp->indices->dims[1] == rank;
        if (sp->indices->data_type != MP_INT64 || (!linear && !coords)) {
            mp_fail(err, "%s: sparse indices must be int64 [%lld] or [%lld,%d]", what, (long long)nnz, (long long)nnz, rank);
            return NULL;
        }
        indices = mp_onnx_tensor_decode(a, sp->indices, true);
    }
    mp_dtype t = (mp_dtype)sp->values->data_type;
    bool data = want_data && numel <= MP_FOLD_MAX_ELEMS && values->data && (!indices || indices->data);
    mp_tensor *x = tensor_alloc(a, t, rank, sp->dims, data);
    if (!data) return x;
    size_t es = elem_size(t);
    if (t == MP_STRING)
        for (int64_t i = 0; i < numel; i++) ((const char **)x->data)[i] = "";
    for (int64_t k = 0; k < nnz; k++) {
        int64_t at = 0;
        if (indices->rank == 1) {
            at = ((const int64_t *)indices->data)[k];
            if (at < 0 || at >= numel) at = -1;
        } else {
            for (int d = 0; d < rank && at >= 0; d++) {
                int64_t c = ((const int64_t *)indices->data)[k * rank + d];
                at = c < 0 || c >= sp->dims[d] ? -1 : at * sp->dims[d] + c;
            }
        }
        if (at < 0) {
            mp_fail(err, "%s: sparse index %lld is out of range", what, (long long)k);
            return NULL;
        }
        memcpy((uint8_t *)x->data + (size_t)at * es, (const uint8_t *)values->data + (size_t)k * es, es);
    }
    return x;
}

/* ---- test data ------------------------------------------------------------ */

mp_tensor *mp_onnx_read_tensor(mp_arena *a, const void *buf, size_t size, bool want_data, mp_err *err)
{
    if (mp_wire_check(&onnx__tensor_proto__descriptor, buf, size, buf, "TensorProto", err)) return NULL;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, buf);
    if (!tp) {
        mp_fail(err, "protobuf-c could not unpack the TensorProto");
        return NULL;
    }
    mp_data_ref ref;
    int64_t n;
    mp_tensor *x = NULL;
    if (!mp_onnx_tensor_check(tp, NULL, "tensor", &ref, &n, a, err)) x = mp_onnx_tensor_decode(a, tp, want_data);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return x;
}
