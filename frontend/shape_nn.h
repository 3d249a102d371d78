/* shape_nn.h - helpers shared by the neural-network shape rules
 * (frontend/shape_nn.c, shape_conv.c, shape_rnn.c, shape_attention.c,
 * shape_train.c); private to them.
 *
 *   int64_t strides[MP_MAX_RANK];
 *   if (nn_ints_attr(n, "strides", nsp, 1, strides, err)) return -1;   // absent: all 1
 *   mp_dim y = nn_dim_affine(x, 1, 2);                                 // x + 2, keeps a symbol only if +0
 */
#ifndef MP_SHAPE_NN_H
#define MP_SHAPE_NN_H

#include "shape.h"

/* Reads an INTS attribute of exactly count entries into out; when absent
 * fills out with dflt. Fails naming the attribute when the count differs. */
int nn_ints_attr(const mp_node *n, const char *name, int count, int64_t dflt, int64_t *out, mp_err *err);

/* d * mul + add. Known d gives a known dim (-1 dim on overflow or negative,
 * caller checks); an unknown d stays itself when the map is the identity and
 * becomes unknown otherwise. */
mp_dim nn_dim_affine(mp_dim d, int64_t mul, int64_t add);

/* Fails when both dims are known and differ: "<what> is 3, expected 4". */
int nn_check_dim(const mp_graph *g, mp_dim got, mp_dim want, const char *what, mp_err *err);

/* The better-known of two dims that must be equal (known beats symbol beats unknown). */
mp_dim nn_dim_merge(mp_dim a, mp_dim b);

/* Fails unless v (when present with a known rank) has that rank. */
int nn_check_rank(const mp_value *v, int rank, const char *what, mp_err *err);

/* Output i gets dtype t and unknown rank. */
static inline int nn_set_unknown(mp_graph *g, const mp_node *n, int i, mp_dtype t)
{
    return mp_set_out(g, n, i, t, -1, NULL);
}

/* Opset of the node's domain; 0 (not imported, e.g. unit-test graphs) reads as "newest". */
static inline int64_t nn_opset(const mp_graph *g, const mp_node *n)
{
    int64_t v = mp_graph_opset(g, n->domain);
    return v > 0 ? v : INT32_MAX;
}

/* Batched matrix product shape of a[..., M, K] x b[..., K, N] with numpy's
 * 1-D promotion; either rank may be unknown (-1: result rank -1). */
int nn_matmul_dims(const mp_graph *g, int ra, const mp_dim *a, int rb, const mp_dim *b, int *rank, mp_dim *out,
                   mp_err *err);

#endif
