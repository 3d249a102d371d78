/* shape_tensor.h - private helpers of the data-movement rules (frontend/shape_tensor*.c).
 *
 * Folding: a data-movement op only moves elements, so each rule describes its
 * result as a gather map (output element e = element idx[e] of source src[e])
 * and one routine applies the map, either to known tensors (konst) or to
 * symbolic shape vectors (symdata), so Shape -> Gather -> Concat -> Reshape
 * chains fold with the same code whether the batch is bound or not:
 *
 *   mp_gmap f;
 *   if (mp_gmap_begin(&f, g, n, 0, 1, &x)) {     // output 0 from source x
 *       for (int64_t e = 0; e < f.numel; e++) f.src[e] = 0, f.idx[e] = ...;
 *       return mp_gmap_end(&f, err);
 *   }
 */
#ifndef MP_SHAPE_TENSOR_H
#define MP_SHAPE_TENSOR_H

#include "shape.h"

/* ---- folding by gather maps ------------------------------------------ */

typedef struct mp_gmap {
    mp_graph *g;
    const mp_node *n;
    int out; /* output slot */
    int nsrc;
    mp_value *const *srcs; /* sources; a map entry src = -1 reads a zero */
    int64_t numel;         /* output elements */
    bool sym;              /* writing a symbolic shape vector, not konst */
    int32_t *src;          /* per output element: source slot */
    int64_t *idx;          /* per output element: flat index in that source */
} mp_gmap;

/* Prepares to fold output `out` (whose dtype/shape the rule has set) from
 * srcs. False (nothing allocated) when the output is not small and fully
 * shaped, or a source's contents are not known. */
bool mp_gmap_begin(mp_gmap *f, mp_graph *g, const mp_node *n, int out, int nsrc, mp_value *const *srcs);
/* Writes the mapped contents into the output and frees the map. Fails only
 * on a map entry outside its source (a model error: index out of range). */
int mp_gmap_end(mp_gmap *f, mp_err *err);
/* Frees the map without writing (a rule that finds it cannot fold after all). */
void mp_gmap_cancel(mp_gmap *f);

/* Row-major strides of dims (rank entries). */
void mp_dims_strides(const int64_t *dims, int rank, int64_t *st);

/* ---- reading arguments ------------------------------------------------ */

typedef enum mp_arg_state {
    MP_ARG_ABSENT = 0, /* neither attribute nor input given */
    MP_ARG_UNKNOWN,    /* given as an input whose contents are not known */
    MP_ARG_KNOWN,
} mp_arg_state;

/* Reads an int list that older opsets give as attribute `attr` and newer ones
 * as input `in` (Squeeze axes, Split split, Slice starts, Pad pads, ...): sets
 * *count and returns the state, or -1 when it is longer than max. attr may be
 * NULL, in may be -1. */
int mp_arg_ints(mp_graph *g, const mp_node *n, const char *attr, int in, int64_t *out, int max, int *count,
                mp_err *err);
/* Reads a known scalar (0-D or 1-element) integer input; false if unknown. */
bool mp_input_int(mp_graph *g, const mp_node *n, int in, int64_t *out);
/* Reads a known 0-D/1-D numeric tensor as doubles; count, or -1. */
int mp_const_reals(const mp_value *v, double *out, int max);

/* Reads a shape-like input (ConstantOfShape, Reshape, Expand, Tile repeats):
 * *count entries into d (known values or symbols), -1 when its contents are
 * not known; *len is the entry count when at least the input's own shape
 * tells it, else -1. Fails on a shape input that is not 1-D or too long. */
int mp_shape_arg(mp_graph *g, const mp_value *v, mp_dim *d, int *count, int *len, mp_err *err);

/* Element types mp_tensor_get_i64/f64 and _set_ convert: bool, 8- to 64-bit
 * integers, fp16, bf16, float, double (not strings, fp8, 2- or 4-bit). */
static inline bool mp_dtype_readable(mp_dtype t)
{
    return t > 0 && t < 64 && (((MP_T_INTS | MP_T_FLOATS | MP_T(MP_BOOL)) >> t) & 1);
}

/* The known dims of v as int64; false when some dim is not known. */
bool mp_known_dims(const mp_value *v, int64_t *dims);

/* Dim arithmetic that keeps symbols where it can: a + 0 = a, a * 1 = a. */
int mp_dim_add(mp_dim a, mp_dim b, mp_dim *r, mp_err *err);
int mp_dim_mul(mp_dim a, mp_dim b, mp_dim *r, mp_err *err);

/* Output dtype named by an attribute (EyeLike dtype, windows output_datatype):
 * dflt when absent; fails on a number that is no dtype. */
int mp_attr_dtype(const mp_node *n, const char *name, mp_dtype dflt, mp_dtype *out, mp_err *err);

#endif
