/* autodiff.h - internal to the training pass (train.c, autodiff.c, grad_*.c,
 * optimizer.c): the state of the reverse walk and the helpers that emit IR.
 *
 * A gradient rule sees one forward node and the gradients of its outputs
 * (dy[k], -1 where none reached it) and calls ad_give() for each input that
 * needs a gradient. Every node it emits is shape-inferred at once, so the
 * next rule can read the shapes of what came before.
 */
#ifndef MP_AUTODIFF_H
#define MP_AUTODIFF_H

#include "ir/ops.h"
#include "passes/train.h"

typedef struct mp_ad {
    mp_graph *g;
    mp_err *err;
    mp_phase phase;        /* phase of the nodes emitted now */
    int32_t nfwd;          /* values that existed before the backward: grad/own/needs cover these */
    int32_t *grad;         /* accumulated gradient of each forward value, -1 none */
    bool *own;             /* grad[v] was made for v alone (not a pass-through of another gradient) */
    bool *needs;           /* v depends on a parameter through float tensors */
} mp_ad;

typedef int (*mp_grad_rule)(mp_ad *ad, int32_t node, const int32_t *dy);

/* The rule for an op, NULL when it has none (autodiff.c's table). */
mp_grad_rule mp_grad_rule_for(mp_op_id op);

/* ---- emitting IR (autodiff.c) ---- */

/* A new value named base + suffix (made unique), role set. */
int32_t ad_value(mp_ad *ad, const char *base, const char *suffix, mp_role role);
/* Adds a node in ad->phase without inferring it (set attributes, then ad_infer). */
int32_t ad_add(mp_ad *ad, const char *op, const char *domain, int nin, const int32_t *in, int nout, const int32_t *out);
/* Same with one new output (role TRANSIENT) named after base; *out gets its id. */
int32_t ad_add1(mp_ad *ad, const char *op, const char *domain, int nin, const int32_t *in, const char *base,
                int32_t *out);
/* Runs the shape rule of node n; -1 with err naming the node on failure. */
int ad_infer(mp_ad *ad, int32_t n);
/* ad_add1 + ad_infer for ops without attributes: the output value, or -1. */
int32_t ad_emit(mp_ad *ad, const char *op, const char *domain, int nin, const int32_t *in, const char *base);

/* Attribute setters (append to n's attributes). */
void ad_attr_int(mp_graph *g, mp_node *n, const char *name, int64_t v);
void ad_attr_float(mp_graph *g, mp_node *n, const char *name, float v);
void ad_attr_str(mp_graph *g, mp_node *n, const char *name, const char *v);
void ad_attr_ints(mp_graph *g, mp_node *n, const char *name, const int64_t *v, int count);
/* Copies every attribute of the forward node src (by id) onto n. */
void ad_attr_copy(mp_graph *g, mp_node *n, int32_t src);

/* An int64 1-D Constant node's output holding vals. */
int32_t ad_const_ints(mp_ad *ad, const int64_t *vals, int count);
/* A float 0-D Constant of dtype t holding x. */
int32_t ad_const_scalar(mp_ad *ad, mp_dtype t, double x);
/* Fills dims[] with v's known shape; fails naming v when a dim is not known. */
int ad_known_dims(mp_ad *ad, int32_t v, int64_t *dims, int *rank);

/* Sums dy over the axes it was broadcast along so it has v's shape: dy itself
 * when the shapes agree (*own = false), else a SumToShape node. */
int32_t ad_sum_to(mp_ad *ad, int32_t dy, int32_t v, bool *own);
/* Output k of forward node n (the mask of Dropout, the indices of MaxPool,
 * SoftmaxCrossEntropyLoss's log_prob), adding it to the node when the model did
 * not ask for it: a new value named after output 0 plus suffix, of dtype t and
 * the shape of value `like`. */
int32_t ad_extra_output(mp_ad *ad, int32_t n, int k, const char *suffix, mp_dtype t, int32_t like);
/* The rule of an op whose gradient is one memplan node: op(in[0..nin)) with n's
 * attributes gives the gradients of n's first k inputs, output i (named
 * suffix[i]) present only when input i needs one; k <= 8 (Conv, the
 * normalizations, GridSample). */
int ad_grad_node(mp_ad *ad, int32_t n, const char *op, int nin, const int32_t *in, int k, const char *const *suffix);
/* The rule of an op whose gradient is one node of one output: op(in[0..nin)) in
 * domain, with n's attributes, its output (named base) given to n's input 0. */
int ad_grad_one(mp_ad *ad, int32_t n, const char *op, const char *domain, int nin, const int32_t *in, const char *base);
/* Adds a contribution to v's gradient (an Add when one is there already). */
int ad_give(mp_ad *ad, int32_t v, int32_t gval, bool own);
/* ad_sum_to + ad_give. */
int ad_give_sum(mp_ad *ad, int32_t v, int32_t gval, bool own);
static inline bool ad_needs(const mp_ad *ad, int32_t v) { return v >= 0 && v < ad->nfwd && ad->needs[v]; }

/* ---- rules (grad_*.c) ---- */
/* An op's rule is named in the grad column of its row in ir/ops/ (0: none).
 * This declares each one named there: for a 0, MP_GRAD_SKIP_##grad becomes
 * MP_GRAD_SKIP_0, whose comma shifts the declaration out of the picked slot. */
#define MP_GRAD_SKIP_0 ~,
#define MP_GRAD_PICK_(skip, decl, ...) decl
#define MP_GRAD_PICK(...) MP_GRAD_PICK_(__VA_ARGS__)
#define MP_OP(id, name, domain, shape, grad, cost) \
    MP_GRAD_PICK(MP_GRAD_SKIP_##grad, int grad(mp_ad *ad, int32_t node, const int32_t *dy);, ~)
#include "ir/ops/all.def"
#undef MP_OP

/* fp16's loss scale: the first and largest (loss_scale.c lowers it on
 * overflow). 2^15: the seed is an fp16 scalar, and 2^16 is past fp16's
 * largest finite value (65504), so it would seed the backward with inf. */
#define MP_FP16_LOSS_SCALE_LOG2 15
#define MP_FP16_LOSS_SCALE 32768.0

/* fp16's dynamic loss scale (loss_scale.c): its two resident states. */
typedef struct mp_loss_scale {
    int32_t log2, good;     /* the scale is 2^(15 + log2); good: finite steps since the last change */
} mp_loss_scale;
/* Makes the states and the backward's seed, a scalar of dtype t. */
int32_t mp_loss_scale_seed(mp_ad *ad, mp_dtype t, mp_loss_scale *ls);
/* 1 when every one of the n gradients is finite, else 0 (an fp32 scalar). */
int32_t mp_loss_scale_check(mp_ad *ad, const int32_t *grads, int n);
/* The states' update from that flag, in place, after every optimizer update. */
int mp_loss_scale_update(mp_ad *ad, const mp_loss_scale *ls, int32_t finite);

/* ---- steps (autodiff.c, optimizer.c) ---- */
/* Emits the backward of the scalar loss; fills param_grad[p] for every
 * parameter p (-1 for one the loss does not reach). seed: the loss gradient value. */
int mp_autodiff(mp_graph *g, int32_t loss, int32_t seed, int32_t *param_grad, mp_err *err);
/* Folds exporters' expansions of GELU and LayerNorm back into Gelu and
 * LayerNormalization nodes (fuse.c), so the backward saves what the fused
 * op saves; relinks the graph. */
int mp_train_fuse(mp_graph *g, mp_err *err);
/* Unrolls every RNN, GRU and LSTM node over its bound sequence length into
 * primitive ops in the node's place (unroll_rnn.c), so autodiff, the
 * executor and the plan see each step; fails naming the node when one cannot
 * be (sequence_lens shorter than the sequence, an unknown activation, an
 * unbound dim); relinks the graph. */
int mp_unroll_rnn(mp_graph *g, mp_err *err);
/* Writes onnxruntime's fused contrib ops (Gelu, BiasGelu, FastGelu,
 * SimplifiedLayerNormalization, SkipLayerNormalization,
 * SkipSimplifiedLayerNormalization, FusedMatMul, Attention) as the ONNX ops they fuse,
 * and the ONNX function ops without a gradient rule (MeanVarianceNormalization)
 * as their bodies, in their place (contrib.c); fails naming a node whose form
 * has no ONNX equivalent; relinks the graph. */
int mp_contrib_lower(mp_graph *g, mp_err *err);
/* Whether mp_contrib_lower rewrites op (domain "" or "ai.onnx": the default). */
bool mp_contrib_rewrites(const char *op, const char *domain);
/* Replaces each node that match() accepts by the nodes rewrite(g, node)
 * appends (writing the node's own output values), in the node's place in the
 * node order; fails with rewrite's message; relinks the graph (expand.c). */
int mp_expand_nodes(mp_graph *g, bool (*match)(const mp_node *), int (*rewrite)(mp_graph *, int32_t, mp_err *),
                    mp_err *err);
/* Emits gradient accumulation (micro_batches > 1) and the optimizer update;
 * with ls (fp16), updates that skip a step whose gradients are not all finite. */
int mp_optimizer_build(mp_graph *g, const mp_train_opts *o, const int32_t *param_grad, const int32_t *master,
                       const mp_loss_scale *ls, mp_err *err);

#endif
