/* train.c - builds the training step in place: classify the tensors, append
 * the loss, the backward (autodiff.c) and the optimizer (optimizer.c), then
 * give every value a role. */
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h"
#include "frontend/shape.h"
#include "passes/autodiff.h"
#include "passes/schedule.h"

mp_train_opts mp_train_defaults(void)
{
    return (mp_train_opts){.loss = MP_LOSS_AUTO, .optimizer = MP_OPT_ADAMW, .precision = MP_FLOAT, .micro_batches = 1};
}

/* ---- classification (the rules `memplan inspect` reports) ---- */

static bool is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }
static bool node_is(const mp_node *n, const char *op)
{
    return is_default_domain(n->domain) && !strcmp(n->op_type, op);
}

static bool named_buffer(const mp_train_opts *o, const char *name)
{
    for (const char *const *b = o->buffers; b && *b; b++)
        if (!strcmp(*b, name)) return true;
    return false;
}

/* A float Constant of two or more elements becomes an initializer: the
 * weights of exporters that write them as Constant nodes (Paddle2ONNX). A
 * scalar stays a Constant: a Clip bound, an epsilon, a scale. */
static const mp_tensor *weight_constant(const mp_node *n)
{
    const mp_attr *a = node_is(n, "Constant") && n->nout == 1 && n->out[0] >= 0 ? mp_node_attr(n, "value") : NULL;
    const mp_tensor *t = a && a->type == MP_ATTR_TENSOR && a->tensors ? a->tensors[0] : NULL;
    return t && mp_dtype_is_float(t->dtype) && t->numel >= 2 && t->rank <= MP_MAX_RANK ? t : NULL;
}

static int constants_to_initializers(mp_graph *g, mp_err *err)
{
    int32_t k = 0, nnew = 0;
    int32_t *inits = mp_arena_alloc(g->arena, (size_t)(g->ninits + g->nnodes + 1) * sizeof *inits);
    if (!inits) return mp_fail(err, "out of memory");
    if (g->ninits) memcpy(inits, g->inits, (size_t)g->ninits * sizeof *inits);
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        const mp_tensor *t = weight_constant(n);
        if (!t) {
            g->nodes[k++] = *n;
            continue;
        }
        mp_value *v = &g->values[n->out[0]];
        mp_dim d[MP_MAX_RANK];
        for (int r = 0; r < t->rank; r++) d[r] = mp_dim_of(t->dims[r]);
        mp_value_set(g, n->out[0], t->dtype, t->rank, d);
        v->flags |= MP_VAL_INITIALIZER;
        v->data.kind = t->data ? MP_DATA_INLINE : MP_DATA_NONE; /* bytes not decoded: seeded when run */
        v->konst = t->data ? (mp_tensor *)t : NULL;
        inits[g->ninits + nnew++] = n->out[0];
    }
    if (!nnew) return 0;
    g->nnodes = k;
    g->inits = inits;
    g->ninits += nnew;
    return mp_graph_link(g, err);
}

int mp_train_classify(mp_graph *g, const mp_train_opts *o, mp_err *err)
{
    if (o->constants_as_params && constants_to_initializers(g, err)) return -1;
    for (int32_t i = 0; i < g->nvalues; i++) g->values[i].role = MP_ROLE_ACTIVATION;
    /* inputs: data unless params_as_inputs names a float input with a fixed first dim, or data_inputs lists them */
    bool as_params = o->params_as_inputs || o->data_inputs;
    int ndata = 0, nnamed = 0;
    for (int32_t i = 0; i < g->ninputs; i++) {
        mp_value *v = &g->values[g->inputs[i]];
        /* a first dim the file leaves open: symbolic stays so once bound (--batch) */
        bool data = v->rank >= 1 && (v->dims[0].v < 0 || v->dims[0].sym >= 0);
        if (o->data_inputs) {
            data = false;
            for (const char *const *d = o->data_inputs; *d; d++) data = data || !strcmp(*d, v->name);
            nnamed += data;
        }
        data = data || !mp_dtype_is_float(v->dtype); /* token ids are never parameters */
        ndata += data;
        v->role = as_params && !data ? MP_ROLE_PARAM : MP_ROLE_INPUT;
    }
    if (o->data_inputs && !nnamed)
        return mp_fail(err, "data_inputs: none of the named inputs is a graph input");
    if (as_params && !ndata && g->ninputs)
        return mp_fail(err, "params_as_inputs: no input has a symbolic first dimension, so data inputs cannot be told "
                            "from parameters");
    for (int32_t i = 0; i < g->ninits; i++) {
        mp_value *v = &g->values[g->inits[i]];
        v->role = mp_dtype_is_float(v->dtype) ? MP_ROLE_PARAM : MP_ROLE_CONST;
    }
    /* BatchNormalization running mean and variance are state, not weights */
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (!node_is(n, "BatchNormalization")) continue;
        for (int k = 3; k <= 4 && k < n->nin; k++)
            if (n->in[k] >= 0 && g->values[n->in[k]].role == MP_ROLE_PARAM) g->values[n->in[k]].role = MP_ROLE_BUFFER;
    }
    /* a float tensor only ever cropped by a Slice whose bounds come from a
     * Shape/Size is a table cached for the longest input (a causal mask) */
    bool *derived = calloc((size_t)g->nvalues + 1, sizeof *derived);
    bool *used = calloc((size_t)g->nvalues + 1, sizeof *used);
    bool *cropped = calloc((size_t)g->nvalues + 1, sizeof *cropped);
    if (!derived || !used || !cropped) {
        free(derived), free(used), free(cropped);
        return mp_fail(err, "out of memory");
    }
    for (int32_t i = 0; i < g->nvalues; i++) cropped[i] = true;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        bool from = node_is(n, "Shape") || node_is(n, "Size");
        for (int k = 0; k < n->nin && !from; k++) from = n->in[k] >= 0 && derived[n->in[k]];
        for (int k = 0; k < n->nout && from; k++)
            if (n->out[k] >= 0) derived[n->out[k]] = true;
        bool crops = node_is(n, "Slice") && n->nin >= 3 &&
                     ((n->in[1] >= 0 && derived[n->in[1]]) || (n->in[2] >= 0 && derived[n->in[2]]));
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k] < 0) continue;
            used[n->in[k]] = true;
            if (!(crops && k == 0)) cropped[n->in[k]] = false;
        }
    }
    for (int32_t i = 0; i < g->nvalues; i++) {
        mp_value *v = &g->values[i];
        if (v->role == MP_ROLE_PARAM && used[i] && cropped[i]) v->role = MP_ROLE_BUFFER;
        if ((v->role == MP_ROLE_PARAM || v->role == MP_ROLE_CONST) && named_buffer(o, v->name))
            v->role = MP_ROLE_BUFFER;
    }
    free(derived), free(used), free(cropped);
    /* Constant nodes' outputs are constants, not activations */
    for (int32_t i = 0; i < g->nnodes; i++)
        if (node_is(&g->nodes[i], "Constant") && g->nodes[i].nout > 0 && g->nodes[i].out[0] >= 0)
            g->values[g->nodes[i].out[0]].role = MP_ROLE_CONST;
    return 0;
}

/* ---- loss ---- */

/* A new graph input of the step (labels, target). */
static int32_t add_input(mp_ad *ad, const char *name, mp_dtype t, int rank, const mp_dim *dims)
{
    mp_graph *g = ad->g;
    int32_t id = ad_value(ad, name, "", MP_ROLE_INPUT);
    mp_value_set(g, id, t, rank, dims);
    g->values[id].flags |= MP_VAL_INPUT;
    int32_t *in = mp_arena_alloc(g->arena, (size_t)(g->ninputs + 1) * sizeof *in);
    if (g->ninputs) memcpy(in, g->inputs, (size_t)g->ninputs * sizeof *in);
    in[g->ninputs++] = id;
    g->inputs = in;
    return id;
}

static int32_t reduce_all(mp_ad *ad, const char *op, int32_t x)
{
    int32_t out;
    int32_t n = ad_add1(ad, op, "", 1, &x, "loss", &out);
    ad_attr_int(ad->g, &ad->g->nodes[n], "keepdims", 0);
    return ad_infer(ad, n) ? -1 : out;
}

/* Appends the loss of output y; returns the scalar loss value, -1 on failure. */
static int32_t build_loss(mp_ad *ad, mp_loss_kind kind, int32_t y)
{
    mp_graph *g = ad->g;
    const mp_value *v = &g->values[y];
    if (!mp_dtype_is_float(v->dtype)) return mp_fail(ad->err, "output '%s' is not a float tensor", v->name);
    if (v->dtype != MP_FLOAT && v->dtype != MP_DOUBLE && v->dtype != MP_FLOAT16 && v->dtype != MP_BFLOAT16)
        return mp_fail(ad->err, "output '%s' is %s: a loss needs float32, float64, float16 or bfloat16 (cast the "
                       "output first)", v->name, mp_dtype_name(v->dtype));
    /* classes: the last axis of [N, C] and of a sequence's [N, T, V]; axis 1
     * of an image-shaped [N, C, H, W, ..] (segmentation, as PyTorch's loss) */
    int axis = v->rank >= 4 ? 1 : v->rank - 1;
    mp_dim c = v->rank >= 2 ? mp_dim_resolve(g, v->dims[axis]) : MP_DIM_UNKNOWN;
    if (kind == MP_LOSS_AUTO) kind = c.v > 1 ? MP_LOSS_XENT : MP_LOSS_MSE;
    if (kind == MP_LOSS_SUM) return reduce_all(ad, "ReduceSum", y);
    if (kind == MP_LOSS_MSE) {
        int32_t in[2] = {y, add_input(ad, "target", v->dtype, v->rank, v->dims)};
        int32_t d = ad_emit(ad, "Sub", "", 2, in, "loss_diff");
        if (d < 0) return -1;
        int32_t sq[2] = {d, d};
        int32_t s = ad_emit(ad, "Mul", "", 2, sq, "loss_sq");
        return s < 0 ? -1 : reduce_all(ad, "ReduceMean", s);
    }
    if (c.v < 1) return mp_fail(ad->err, "cross-entropy needs logits [.., C] with a known C; '%s' is not", v->name);
    /* SoftmaxCrossEntropyLoss takes classes on axis 1 and labels of the other
     * axes: as given for [N, C, d..], else flattened to [N, C] and [N] */
    mp_dim ldims[MP_MAX_RANK];
    for (int i = 0, k = 0; i < v->rank; i++)
        if (i != axis) ldims[k++] = v->dims[i];
    int32_t labels = add_input(ad, "labels", MP_INT64, v->rank - 1, ldims);
    int32_t scores = y, lab = labels;
    if (axis != 1) {
        int64_t s2[2] = {-1, c.v}, s1[1] = {-1};
        int32_t a[2] = {y, ad_const_ints(ad, s2, 2)}, b[2] = {labels, ad_const_ints(ad, s1, 1)};
        if (a[1] < 0 || b[1] < 0) return -1;
        scores = ad_emit(ad, "Reshape", "", 2, a, "loss_logits");
        lab = ad_emit(ad, "Reshape", "", 2, b, "loss_labels");
        if (scores < 0 || lab < 0) return -1;
    }
    int32_t in[2] = {scores, lab};
    int32_t out[2] = {ad_value(ad, "loss", "", MP_ROLE_ACTIVATION),
                      ad_value(ad, "loss_log_prob", "", MP_ROLE_ACTIVATION)};
    int32_t n = ad_add(ad, "SoftmaxCrossEntropyLoss", "", 2, in, 2, out);
    return ad_infer(ad, n) ? -1 : out[0];
}

/* ---- mixed precision ---- */

/* A low-precision copy of a float tensor (shape only when its bytes are not decoded). */
static mp_tensor *lower_tensor(mp_graph *g, const mp_tensor *t, mp_dtype low)
{
    mp_tensor *r = mp_tensor_new(g->arena, low, t->rank, t->dims);
    if (!t->data)
        r->data = NULL;
    else
        for (int64_t i = 0; i < t->numel; i++) mp_tensor_set_f64(r, i, mp_tensor_get_f64(t, i));
    return r;
}

/* Parameters become low-precision working copies, each with an fp32 master
 * (OPT_STATE) in master[p]; float inputs, buffers, constants and casts to
 * float become low precision; then the forward is inferred again. */
static int lower_precision(mp_graph *g, mp_dtype low, int32_t *master, mp_err *err)
{
    mp_ad ad = {g, err, MP_PHASE_FORWARD, g->nvalues, NULL, NULL, NULL};
    int32_t n0 = g->nvalues;
    for (int32_t i = 0; i < n0; i++) {
        mp_value *v = &g->values[i];
        master[i] = -1;
        if (v->producer >= 0 || v->dtype != MP_FLOAT) continue;
        if (v->role == MP_ROLE_PARAM) {
            master[i] = ad_value(&ad, v->name, ".master", MP_ROLE_OPT_STATE);
            v = &g->values[i];
            mp_value_set(g, master[i], MP_FLOAT, v->rank, v->dims);
        }
        if (v->konst) v->konst = lower_tensor(g, v->konst, low);
        mp_value_set(g, i, low, v->rank, v->dims);
    }
    for (int32_t i = 0; i < g->nnodes; i++) {
        mp_node *n = &g->nodes[i];
        if (*n->domain) continue;
        if (!strcmp(n->op_type, "Cast")) {
            for (int k = 0; k < n->nattrs; k++)
                if (!strcmp(n->attrs[k].name, "to") && n->attrs[k].i == MP_FLOAT) n->attrs[k].i = low;
            continue;
        }
        if (strcmp(n->op_type, "Constant") && strcmp(n->op_type, "ConstantOfShape")) continue;
        const mp_value *out = mp_val(g, n->out[0]);
        if (!out || out->dtype != MP_FLOAT) continue;
        /* one `value` tensor attribute in low precision (value_float(s) included) */
        mp_tensor *t = NULL;
        for (int k = 0; k < n->nattrs && !t; k++)
            if (n->attrs[k].type == MP_ATTR_TENSOR && n->attrs[k].tensors)
                t = lower_tensor(g, n->attrs[k].tensors[0], low);
        if (!t && out->konst && !strcmp(n->op_type, "Constant")) t = lower_tensor(g, out->konst, low);
        if (!t && !strcmp(n->op_type, "Constant"))
            return mp_fail(err, "node '%s': cannot lower this constant to %s", n->name, mp_dtype_name(low));
        if (!t) { /* ConstantOfShape without value: float 0 */
            t = mp_tensor_new(g->arena, low, 1, (int64_t[]){1});
        }
        n->nattrs = 0;
        n->attrs = NULL;
        ad_attr_int(g, n, "value", 0);
        n->attrs[0].type = MP_ATTR_TENSOR;
        n->attrs[0].tensors = mp_arena_alloc(g->arena, sizeof *n->attrs[0].tensors);
        n->attrs[0].tensors[0] = t;
    }
    if (mp_infer(g, err)) return -1;
    return 0;
}

/* ---- the step ---- */

static int build_step(mp_graph *g, const mp_train_opts *o, const int32_t *master, mp_err *err);

bool mp_value_is_saved(const mp_graph *g, int32_t id)
{
    if (id < 0 || id >= g->nvalues) return false;
    const mp_value *v = &g->values[id];
    if (v->role != MP_ROLE_ACTIVATION && v->role != MP_ROLE_INPUT) return false;
    for (int32_t k = 0; k < v->ncons; k++)
        if (g->nodes[v->cons[k]].phase == MP_PHASE_BACKWARD) return true;
    return false;
}

/* Ops whose output is the same bytes as input 0 (no copy, in PyTorch and in
 * memplan's runtime): the output aliases its input, so a saved view counts its
 * base's buffer once. Transpose moves elements; see mark_transposed_views. */
static const char *const view_ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};

/* The input node n's output could view: n is a view op whose output is not
 * yet an alias and has its input's bytes; -1 otherwise. */
static int32_t view_input(const mp_graph *g, const mp_node *n)
{
    bool view = false;
    for (size_t k = 0; k < sizeof view_ops / sizeof *view_ops && !view; k++) view = node_is(n, view_ops[k]);
    if (!view || n->nin < 1 || n->nout < 1) return -1;
    int32_t x = n->in[0], y = n->out[0];
    if (x < 0 || y < 0 || x == y || g->values[y].alias >= 0) return -1;
    return g->values[x].bytes >= 0 && g->values[x].bytes == g->values[y].bytes ? x : -1;
}

/* The forward's views, and the loss's (run again once the loss is built). */
static void mark_views(mp_graph *g)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        int32_t x = n->phase <= MP_PHASE_LOSS ? view_input(g, n) : -1;
        if (x >= 0) g->values[n->out[0]].alias = x;
    }
}

/* GEMM readers take an operand transposed for free (BLAS and cuBLAS flags):
 * operand slots of MatMul, Gemm, MatMulGradA and MatMulGradB. */
static bool reads_as_gemm_operand(const mp_node *n, int32_t v)
{
    static const char *const gemm_ops[] = {"MatMul", "Gemm", "MatMulGradA", "MatMulGradB"};
    bool gemm = false;
    for (size_t k = 0; k < sizeof gemm_ops / sizeof *gemm_ops && !gemm; k++) gemm = !strcmp(n->op_type, gemm_ops[k]);
    if (!gemm) return false;
    for (int32_t k = 2; k < n->nin; k++)
        if (n->in[k] == v) return false; /* Gemm's C is added elementwise */
    return true;
}

/* A Transpose that swaps only the last two axes, read only by GEMM operands,
 * is a view (MP_VAL_TVIEW): its output keeps its input's bytes and each reader
 * reads them transposed, as PyTorch's x.t() feeding a matmul does. Any other
 * Transpose copies. Runs on the whole step, so backward readers count too. */
static void mark_transposed_views(mp_graph *g)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (!node_is(n, "Transpose") || n->nin < 1 || n->nout != 1 || n->in[0] < 0 || n->out[0] < 0) continue;
        mp_value *x = &g->values[n->in[0]], *y = &g->values[n->out[0]];
        if (y->rank < 2 || y->alias >= 0 || (x->flags & MP_VAL_TVIEW) || (y->flags & MP_VAL_OUTPUT) || !y->ncons ||
            x->bytes < 0 || x->bytes != y->bytes)
            continue;
        const mp_attr *perm = mp_node_attr(n, "perm");
        bool swap = perm ? perm->n == y->rank : y->rank == 2;
        for (int a = 0; perm && swap && a < y->rank; a++)
            swap = perm->ints[a] == (a == y->rank - 2 ? y->rank - 1 : a == y->rank - 1 ? y->rank - 2 : a);
        for (int32_t c = 0; swap && c < y->ncons; c++) swap = reads_as_gemm_operand(&g->nodes[y->cons[c]], n->out[0]);
        if (!swap) continue;
        y->alias = n->in[0];
        y->flags |= MP_VAL_TVIEW;
    }
}

/* Ops that may write output `out` over input `in` when that input dies there:
 * the CPU and CUDA kernels read every element of it that an output element
 * needs before writing that element (row statistics first, then the row), as
 * Megatron-LM's cross-entropy overwrites the logits with the softmax and the
 * softmax with its gradient. */
static const struct {
    const char *op, *domain;
    int out, in;
} in_place_ops[] = {
    {"SoftmaxCrossEntropyLoss", "", 1, 0},        /* log_prob over the scores */
    {"SoftmaxCrossEntropyGrad", "memplan", 0, 1}, /* dScores over log_prob */
    {"SoftmaxGrad", "memplan", 0, 0},             /* dX over dY */
    {"LogSoftmaxGrad", "memplan", 0, 0},          /* dX over dY */
};

static bool same_domain(const char *a, const char *b)
{
    return is_default_domain(a) ? is_default_domain(b) : b && !strcmp(a, b);
}

/* True when node `reader` is the last to read x's bytes. The values on x's
 * buffer form one path, from x up its alias chain to the owner (sharers[v]:
 * how many values alias v, so nothing else shares it); each is read only by
 * `reader` or by the node that writes the next value down the path (a view, an
 * in-place write), and none outlives the step's arena (graph outputs, inputs
 * and initializers live on). */
static bool dies_at(const mp_graph *g, const int32_t *sharers, int32_t x, int32_t reader)
{
    if (sharers[x]) return false;
    int32_t below = -1; /* the path's value that aliases v */
    for (int32_t v = x, hops = 0; v >= 0; below = v, v = g->values[v].alias) {
        const mp_value *w = &g->values[v];
        if (hops++ > g->nvalues || (below >= 0 && sharers[v] != 1)) return false;
        if (w->flags & (MP_VAL_OUTPUT | MP_VAL_INPUT | MP_VAL_INITIALIZER | MP_VAL_TVIEW)) return false;
        if (w->alias < 0 && w->producer < 0) return false;
        for (int32_t c = 0; c < w->ncons; c++) {
            const mp_node *n = &g->nodes[w->cons[c]];
            bool writes_below = false;
            for (int k = 0; k < n->nout && below >= 0 && !writes_below; k++) writes_below = n->out[k] == below;
            if (w->cons[c] != reader && !writes_below) return false;
        }
    }
    return true;
}

static void share(mp_graph *g, int32_t *sharers, int32_t y, int32_t x)
{
    g->values[y].alias = x;
    sharers[x]++;
}

/* Outputs of in_place_ops take their dying input's buffer: the loss of a
 * language model, its largest step, holds one vocabulary-sized buffer
 * instead of three (scores, log_prob, their gradient). */
static void mark_in_place(mp_graph *g, int32_t *sharers)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        for (size_t k = 0; k < sizeof in_place_ops / sizeof *in_place_ops; k++) {
            if (strcmp(n->op_type, in_place_ops[k].op) || !same_domain(n->domain, in_place_ops[k].domain) ||
                n->nout <= in_place_ops[k].out || n->nin <= in_place_ops[k].in)
                continue;
            int32_t x = n->in[in_place_ops[k].in], y = n->out[in_place_ops[k].out];
            if (x < 0 || y < 0 || g->values[y].alias >= 0 || (g->values[y].flags & MP_VAL_OUTPUT)) continue;
            if (g->values[x].dtype != g->values[y].dtype || g->values[x].bytes != g->values[y].bytes) continue;
            if (dies_at(g, sharers, x, i)) share(g, sharers, y, x);
        }
    }
}

/* Backward reshapes of a gradient are views too (PyTorch's ViewBackward
 * reshapes dY without a copy), where nothing but the reshape reads dY: a
 * later in-place sum into the view then overwrites bytes nobody needs. */
static void mark_gradient_views(mp_graph *g, int32_t *sharers)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        int32_t x = n->phase == MP_PHASE_BACKWARD ? view_input(g, n) : -1;
        if (x < 0) continue;
        int32_t y = n->out[0];
        if (g->values[x].role != MP_ROLE_TRANSIENT || g->values[y].role != MP_ROLE_TRANSIENT) continue;
        if (dies_at(g, sharers, x, i)) share(g, sharers, y, x);
    }
}

int mp_train_share_buffers(mp_graph *g, mp_err *err)
{
    int32_t *sharers = calloc((size_t)g->nvalues + 1, sizeof *sharers);
    if (!sharers) return mp_fail(err, "out of memory");
    for (int32_t v = 0; v < g->nvalues; v++)
        if (g->values[v].alias >= 0 && g->values[v].alias < g->nvalues) sharers[g->values[v].alias]++;
    mark_gradient_views(g, sharers);
    mark_in_place(g, sharers);
    free(sharers);
    return 0;
}

/* Roles of what the passes left unset: by the phase of the producer. */
static void finish_roles(mp_graph *g)
{
    for (int32_t i = 0; i < g->nvalues; i++) {
        mp_value *v = &g->values[i];
        if (v->producer < 0 || v->role != MP_ROLE_NONE) continue;
        mp_phase p = g->nodes[v->producer].phase;
        v->role = p <= MP_PHASE_LOSS ? MP_ROLE_ACTIVATION : MP_ROLE_TRANSIENT;
    }
    for (int32_t i = 0; i < g->nvalues; i++)
        if (g->values[i].role == MP_ROLE_NONE) g->values[i].role = MP_ROLE_TRANSIENT;
}

int mp_train_build(mp_graph *g, const mp_train_opts *o, mp_err *err)
{
    if (o->micro_batches < 1) return mp_fail(err, "micro_batches must be at least 1, not %d", o->micro_batches);
    if (o->precision != MP_FLOAT && o->precision != MP_BFLOAT16 && o->precision != MP_FLOAT16)
        return mp_fail(err, "precision must be float32, bfloat16 or float16, not %s", mp_dtype_name(o->precision));
    if (g->noutputs < 1) return mp_fail(err, "the model has no output to take a loss of");
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].phase != MP_PHASE_FORWARD) return mp_fail(err, "the graph already holds a training step");
    if (mp_train_classify(g, o, err)) return -1;
    int64_t nparams = 0;
    for (int32_t i = 0; i < g->nvalues; i++) nparams += g->values[i].role == MP_ROLE_PARAM;
    if (!nparams) {
        int32_t nconst = 0; /* exporters that write weights as Constant nodes */
        for (int32_t i = 0; i < g->nnodes; i++) nconst += weight_constant(&g->nodes[i]) != NULL;
        if (nconst)
            return mp_fail(err, "the model has no parameters (float initializers) to train; its %d float Constant "
                                "tensors may be its weights (--constants-as-params trains them)", (int)nconst);
        return mp_fail(err, "the model has no parameters (float initializers) to train");
    }
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op < 0)
            return mp_fail(err, "node '%s' (%s) was not inferred: run mp_infer first", g->nodes[i].name,
                           g->nodes[i].op_type);

    int32_t *master = NULL;
    if (o->precision != MP_FLOAT) {
        master = malloc((size_t)g->nvalues * sizeof *master);
        if (!master) return mp_fail(err, "out of memory");
        mp_err inner = {{0}};
        if (lower_precision(g, o->precision, master, &inner)) {
            free(master);
            return mp_fail(err, "lowering to %s: %s", mp_dtype_name(o->precision), inner.msg);
        }
    }
    int rc = build_step(g, o, master, err);
    free(master);
    return rc;
}

/* The loss, backward and optimizer, after classification (and lowering). */
static int build_step(mp_graph *g, const mp_train_opts *o, const int32_t *master, mp_err *err)
{
    if (mp_unroll_rnn(g, err) || mp_contrib_lower(g, err) || mp_train_fuse(g, err)) return -1;
    mark_views(g);
    mp_ad ad = {g, err, MP_PHASE_LOSS, g->nvalues, NULL, NULL, NULL};
    int32_t loss = build_loss(&ad, o->loss, g->outputs[0]);
    if (loss < 0) return -1;
    mark_views(g); /* the loss's own reshapes */
    ad.phase = MP_PHASE_BACKWARD;
    /* fp16: the loss is scaled so small gradients stay representable; the update unscales */
    mp_loss_scale ls;
    bool scaled = o->precision == MP_FLOAT16;
    int32_t seed = scaled ? mp_loss_scale_seed(&ad, g->values[loss].dtype, &ls)
                          : ad_const_scalar(&ad, g->values[loss].dtype, 1.0);
    if (seed < 0) return -1;
    int32_t nvals = g->nvalues;
    int32_t *param_grad = malloc((size_t)nvals * sizeof *param_grad);
    if (!param_grad) return mp_fail(err, "out of memory");
    int rc = mp_autodiff(g, loss, seed, param_grad, err);
    if (!rc) rc = mp_optimizer_build(g, o, param_grad, master, scaled ? &ls : NULL, err);
    free(param_grad);
    if (rc) return -1;
    if (mp_graph_link(g, err)) return -1;
    mark_transposed_views(g);
    if (mp_train_share_buffers(g, err)) return -1;
    finish_roles(g);
    return o->optimizer_in_backward ? mp_graph_hoist_phase(g, MP_PHASE_OPTIMIZER, err) : 0;
}
