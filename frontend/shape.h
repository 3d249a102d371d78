/* shape.h - helpers shared by the shape rules (frontend/shape_*.c).
 *
 *   int shape_Relu(mp_graph *g, mp_node *n, mp_err *err) {
 *       const mp_value *x = mp_in(g, n, 0);
 *       if (!x) return mp_fail(err, "missing input X");
 *       return mp_set_out_like(g, n, 0, x->dtype, x);
 *   }
 *
 * Rules see their inputs already inferred (dtype may still be UNDEFINED and
 * rank -1 when upstream is unknown: then set what can be set and return 0).
 * A rule returns -1 only for a model error (bad attribute, incompatible shapes).
 */
#ifndef MP_SHAPE_H
#define MP_SHAPE_H

#include "ir/ops.h"

/* Input i of n, or NULL when omitted (empty name) or beyond nin. */
mp_value *mp_in(mp_graph *g, const mp_node *n, int i);
/* Output i's value, or NULL when omitted. */
mp_value *mp_out(mp_graph *g, const mp_node *n, int i);

/* Sets output i (no-op when omitted). dims may be NULL when rank < 0. */
int mp_set_out(mp_graph *g, const mp_node *n, int i, mp_dtype t, int rank, const mp_dim *dims);
/* Sets output i to dtype t with the shape of `like`. */
int mp_set_out_like(mp_graph *g, const mp_node *n, int i, mp_dtype t, const mp_value *like);

/* Multidirectional (numpy) broadcast of nv shapes. Unknown rank -> *rank = -1.
 * Fails with a message naming the two dims that disagree. */
int mp_broadcast(const mp_graph *g, int nv, const mp_value *const *vs, int *rank, mp_dim *dims, mp_err *err);

/* Normalizes axis into [0, rank) (rank+1 when allow_end); fails if out of range. */
int mp_norm_axis(int64_t axis, int rank, bool allow_end, int64_t *out, mp_err *err);

/* Reads a known 0-D/1-D integer tensor (konst) into out[0..max); returns the
 * element count, or -1 when the contents are not known or longer than max. */
int mp_const_ints(const mp_value *v, int64_t *out, int max);
/* Like mp_const_ints but also accepts symbolic entries (value->symdata), so
 * Shape(x) of x[batch,3] reads as {batch, 3}; a negative known entry reads as
 * {value, MP_SYM_LITERAL}. Returns count or -1. */
int mp_const_dims(const mp_graph *g, const mp_value *v, mp_dim *out, int max);
/* True when the value's contents are known (konst != NULL). */
static inline bool mp_is_const(const mp_value *v) { return v && v->konst; }

/* Sets output i's known contents; also sets dtype/shape from t. */
int mp_set_out_const(mp_graph *g, const mp_node *n, int i, mp_tensor *t);
/* Sets output i's (possibly symbolic) shape-vector contents: a 1-D int64 of
 * count entries (0-D when scalar). Also sets dtype/shape, and konst if all known. */
int mp_set_out_dims(mp_graph *g, const mp_node *n, int i, const mp_dim *d, int count, bool scalar);

/* Product of dims, as a dim: known when all known (fails on overflow). */
int mp_dims_product(const mp_dim *d, int n, mp_dim *out, mp_err *err);

/* numel of a value small enough to fold (<= MP_FOLD_MAX_ELEMS), else -1. */
int64_t mp_foldable_numel(const mp_value *v);

/* Checks an input's dtype is known and one of the allowed (mask of 1<<dtype). */
#define MP_T(t) (1ull << (t))
#define MP_T_FLOATS (MP_T(MP_FLOAT) | MP_T(MP_DOUBLE) | MP_T(MP_FLOAT16) | MP_T(MP_BFLOAT16))
#define MP_T_INTS                                                                                          \
    (MP_T(MP_INT8) | MP_T(MP_INT16) | MP_T(MP_INT32) | MP_T(MP_INT64) | MP_T(MP_UINT8) | MP_T(MP_UINT16) | \
     MP_T(MP_UINT32) | MP_T(MP_UINT64))
#define MP_T_NUMERIC (MP_T_FLOATS | MP_T_INTS)

/* Whether MaxUnpool node n is other than its plain form (the default output
 * shape, windows that do not overlap, so each entry goes to its own flat index
 * of Y): 1 with why saying how, else 0. Its gradient rule and its CUDA
 * lowering handle only the plain form. */
int mp_max_unpool_irregular(const mp_graph *g, const mp_node *n, char *why, size_t len);

#endif
