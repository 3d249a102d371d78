/* shape_elementwise.c - shape rules of the elementwise ops (ir/ops/elementwise.def):
 * unary math and activations, binary and variadic ops with numpy broadcasting,
 * Where, Clip, casts, random generators and string ops.
 *
 * Each op's kernel, accepted dtypes and attributes are one row of
 * elem_rules[]; constant folding runs the kernels of fold.h. Shape vectors
 * with symbolic entries (value->symdata, from Shape of [batch, 3]) go through
 * the arithmetic PyTorch exports do on shapes, keeping an entry only while it
 * is still a dim: batch + 0, batch * 1, batch - batch, (batch == -1) = false.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fold.h"
#include "shape.h"

/* ---- the op table ---------------------------------------------------------- */

#define T_F MP_T_FLOATS
#define T_N MP_T_NUMERIC
#define T_SIGNED (MP_T_FLOATS | MP_T(MP_INT8) | MP_T(MP_INT16) | MP_T(MP_INT32) | MP_T(MP_INT64))
#define T_I MP_T_INTS
#define T_B MP_T(MP_BOOL)

typedef struct elem_rule {
    mp_fold_op fold;
    uint64_t types;        /* accepted input dtypes, checked when known */
    bool to_bool;          /* output is bool (comparisons, IsNaN) */
    const char *attr[2];   /* float attributes passed to the kernel as p[0], p[1] */
    double dflt[2];
} elem_rule;

/* OP(op, kernel, accepted dtypes, optional fields) */
#define OP(id, kernel, accepted, ...) [MP_OP_##id] = {.fold = MP_FOLD_##kernel, .types = (accepted), __VA_ARGS__}
#define BOOL_OUT .to_bool = true
#define PARAMS(a, da, b, db) .attr = {a, b}, .dflt = {da, db}

static const elem_rule elem_rules[MP_OP_COUNT] = {
    OP(Abs, ABS, T_N),
    OP(Acos, ACOS, T_F),
    OP(Acosh, ACOSH, T_F),
    OP(Asin, ASIN, T_F),
    OP(Asinh, ASINH, T_F),
    OP(Atan, ATAN, T_F),
    OP(Atanh, ATANH, T_F),
    OP(BitwiseNot, BITNOT, T_I),
    OP(Ceil, CEIL, T_F),
    OP(Celu, CELU, T_F, PARAMS("alpha", 1.0, NULL, 0)),
    OP(Cos, COS, T_F),
    OP(Cosh, COSH, T_F),
    OP(Elu, ELU, T_F, PARAMS("alpha", 1.0, NULL, 0)),
    OP(Erf, ERF, T_N),
    OP(Exp, EXP, T_F),
    OP(Floor, FLOOR, T_F),
    OP(Gelu, GELU, T_F),                                    /* approximate=tanh picks GELU_TANH */
    OP(HardSigmoid, HARDSIGMOID, T_F, PARAMS("alpha", 0.2, "beta", 0.5)),
    OP(HardSwish, HARDSWISH, T_F),
    OP(IsInf, ISINF, T_F, BOOL_OUT, PARAMS("detect_negative", 1, "detect_positive", 1)),
    OP(IsNaN, ISNAN, T_F, BOOL_OUT),
    OP(LeakyRelu, LEAKYRELU, T_F, PARAMS("alpha", 0.01, NULL, 0)),
    OP(Log, LOG, T_F),
    OP(Mish, MISH, T_F),
    OP(Neg, NEG, T_SIGNED),
    OP(Not, NOT, T_B),
    OP(Reciprocal, RECIPROCAL, T_F),
    OP(Relu, RELU, T_SIGNED),
    OP(Round, ROUND, T_F),
    OP(Selu, SELU, T_F, PARAMS("alpha", 1.67326319217681884765625, "gamma", 1.05070102214813232421875)),
    OP(Shrink, SHRINK, T_N, PARAMS("bias", 0.0, "lambd", 0.5)),
    OP(Sigmoid, SIGMOID, T_F),
    OP(Sign, SIGN, T_N),
    OP(Sin, SIN, T_F),
    OP(Sinh, SINH, T_F),
    OP(Softplus, SOFTPLUS, T_F),
    OP(Softsign, SOFTSIGN, T_F),
    OP(Sqrt, SQRT, T_F),
    OP(Swish, SWISH, T_F, PARAMS("alpha", 1.0, NULL, 0)),
    OP(Tan, TAN, T_F),
    OP(Tanh, TANH, T_F),
    OP(ThresholdedRelu, THRESHRELU, T_F, PARAMS("alpha", 1.0, NULL, 0)),

    OP(Add, ADD, T_N),
    OP(And, AND, T_B),
    OP(BitShift, SHL, T_I),                                 /* direction=RIGHT picks SHR */
    OP(BitwiseAnd, BITAND, T_I),
    OP(BitwiseOr, BITOR, T_I),
    OP(BitwiseXor, BITXOR, T_I),
    OP(Div, DIV, T_N),
    OP(Equal, EQ, T_N | T_B | MP_T(MP_STRING), BOOL_OUT),
    OP(Greater, GT, T_N, BOOL_OUT),
    OP(GreaterOrEqual, GE, T_N, BOOL_OUT),
    OP(Less, LT, T_N, BOOL_OUT),
    OP(LessOrEqual, LE, T_N, BOOL_OUT),
    OP(Mod, MOD, T_N),                                      /* fmod=1 picks FMOD */
    OP(Mul, MUL, T_N),
    OP(Or, OR, T_B),
    OP(Pow, POW, T_N),
    OP(PRelu, PRELU, T_N),
    OP(Sub, SUB, T_N),
    OP(Xor, XOR, T_B),

    OP(Max, MAX, T_N),
    OP(Mean, ADD, T_F),                                     /* then divided by the input count */
    OP(Min, MIN, T_N),
    OP(Sum, ADD, T_N),
};
#undef OP

/* The node's op id (the driver sets n->op; a rule called directly may not have it). */
static int op_of(const mp_node *n)
{
    if (n->op >= 0 && n->op < MP_OP_COUNT) return n->op;
    const mp_op_def *d = mp_op_find(n->op_type, n->domain);
    return d ? (int)d->id : 0;
}

static int check_type(const mp_node *n, const mp_value *v, const char *what, uint64_t allowed, mp_err *err)
{
    if (!v || v->dtype == MP_UNDEFINED || !allowed || (allowed & MP_T(v->dtype))) return 0;
    return mp_fail(err, "input %s '%s' has dtype %s, which %s does not accept", what, v->name, mp_dtype_name(v->dtype),
                   n->op_type);
}

/* Inputs that must agree on dtype (A and B of Add); unknown ones are skipped. */
static int check_same_type(const mp_node *n, int nv, mp_value *const *vs, mp_err *err)
{
    const mp_value *first = NULL;
    for (int k = 0; k < nv; k++) {
        if (!vs[k] || vs[k]->dtype == MP_UNDEFINED) continue;
        if (!first) first = vs[k];
        else if (vs[k]->dtype != first->dtype)
            return mp_fail(err, "inputs '%s' (%s) and '%s' (%s) of %s must have the same dtype", first->name,
                           mp_dtype_name(first->dtype), vs[k]->name, mp_dtype_name(vs[k]->dtype), n->op_type);
    }
    return 0;
}

static mp_dtype first_dtype(int nv, mp_value *const *vs)
{
    for (int k = 0; k < nv; k++)
        if (vs[k] && vs[k]->dtype != MP_UNDEFINED) return vs[k]->dtype;
    return MP_UNDEFINED;
}

/* mp_broadcast, with the inputs' names and types added to its message. */
static int broadcast(mp_graph *g, int nv, mp_value *const *vs, int *rank, mp_dim *dims, mp_err *err)
{
    mp_err e;
    if (!mp_broadcast(g, nv, (const mp_value *const *)vs, rank, dims, &e)) return 0;
    char list[384] = "", t[128];
    size_t k = 0;
    for (int i = 0; i < nv && k < sizeof list - 1; i++)
        if (vs[i])
            k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s' %s", k ? ", " : "", vs[i]->name,
                                  mp_value_type_str(g, vs[i], t, sizeof t));
    return mp_fail(err, "%s (inputs %s)", e.msg, list);
}

/* ---- folding ----------------------------------------------------------------- */

/* Folds output 0 with a kernel when every input is known and the output small;
 * true when it did. */
static bool fold_known(mp_graph *g, const mp_node *n, mp_fold_op op, int nv, mp_value *const *vs, const double *p)
{
    const mp_tensor *ts[2];
    mp_value *y = mp_out(g, n, 0);
    if (!y || mp_foldable_numel(y) < 0) return false;
    for (int k = 0; k < nv; k++) {
        if (!mp_is_const(vs[k])) return false;
        ts[k] = vs[k]->konst;
    }
    mp_tensor *t = mp_fold_map(g->arena, op, nv, ts, p, y->dtype);
    if (t) mp_set_out_const(g, n, 0, t);
    return t != NULL;
}

/* One entry of a shape vector: a known value (any sign), a symbol, or unknown. */
typedef struct sym_entry {
    int64_t v;
    int32_t sym;
    bool known;
} sym_entry;

static const sym_entry SYM_UNKNOWN = {0, -1, false};

static sym_entry sym_known(int64_t v) { return (sym_entry){v, -1, true}; }

/* Reads a 0-D/1-D integer or bool value as entries; -1 when its contents are
 * not known. Known tensors are read exactly (a -1 stays -1). */
static int sym_read(mp_graph *g, const mp_value *v, sym_entry *out)
{
    if (!v || v->rank > 1) return -1;
    if (v->konst) {
        if (v->konst->numel > MP_MAX_RANK || (!mp_dtype_is_int(v->konst->dtype) && v->konst->dtype != MP_BOOL))
            return -1;
        for (int64_t i = 0; i < v->konst->numel; i++) out[i] = sym_known(mp_tensor_get_i64(v->konst, i));
        return (int)v->konst->numel;
    }
    if (!v->symdata || v->nsymdata > MP_MAX_RANK) return -1;
    for (int i = 0; i < v->nsymdata; i++) {
        mp_dim d = mp_dim_resolve(g, v->symdata[i]);
        bool known = d.v >= 0 || d.sym == MP_SYM_LITERAL;
        out[i] = known ? sym_known(d.v) : d.sym >= 0 ? (sym_entry){0, d.sym, false} : SYM_UNKNOWN;
    }
    return v->nsymdata;
}

/* Value range of an entry: a symbol is a dim, so never negative. */
static void sym_range(sym_entry e, int64_t *lo, int64_t *hi)
{
    *lo = e.known ? e.v : e.sym >= 0 ? 0 : INT64_MIN;
    *hi = e.known ? e.v : INT64_MAX;
}

/* a < b (or a <= b when le) decided from ranges: 1, 0, or -1 undecided. */
static int sym_less(sym_entry a, sym_entry b, bool le)
{
    int64_t alo, ahi, blo, bhi;
    sym_range(a, &alo, &ahi);
    sym_range(b, &blo, &bhi);
    if (!a.known && a.sym >= 0 && a.sym == b.sym) return le;
    if (le ? ahi <= blo : ahi < blo) return 1;
    if (le ? alo > bhi : alo >= bhi) return 0;
    return -1;
}

static sym_entry sym_bool(int r) { return r < 0 ? SYM_UNKNOWN : sym_known(r); }

/* op on two entries, when the result is still expressible. */
static sym_entry sym_binary(mp_fold_op op, sym_entry a, sym_entry b)
{
    int64_t r;
    if (a.known && b.known) return mp_fold_scalar_i64(op, a.v, b.v, &r) ? sym_known(r) : SYM_UNKNOWN;
    bool same = !a.known && a.sym >= 0 && a.sym == b.sym;
    bool a0 = a.known && a.v == 0, b0 = b.known && b.v == 0, a1 = a.known && a.v == 1, b1 = b.known && b.v == 1;
    switch (op) {
    case MP_FOLD_ADD: return b0 ? a : a0 ? b : SYM_UNKNOWN;
    case MP_FOLD_SUB: return b0 ? a : same ? sym_known(0) : SYM_UNKNOWN;
    case MP_FOLD_MUL: return b1 ? a : a1 ? b : (a0 || b0) ? sym_known(0) : SYM_UNKNOWN;
    case MP_FOLD_DIV: return b1 ? a : SYM_UNKNOWN;
    case MP_FOLD_EQ: {
        int lt = sym_less(a, b, false), gt = sym_less(b, a, false);
        return same ? sym_known(1) : (lt == 1 || gt == 1) ? sym_known(0) : SYM_UNKNOWN;
    }
    case MP_FOLD_LT: return sym_bool(sym_less(a, b, false));
    case MP_FOLD_LE: return sym_bool(sym_less(a, b, true));
    case MP_FOLD_GT: return sym_bool(sym_less(b, a, false));
    case MP_FOLD_GE: return sym_bool(sym_less(b, a, true));
    case MP_FOLD_MAX: return sym_less(b, a, true) == 1 ? a : sym_less(a, b, true) == 1 ? b : SYM_UNKNOWN;
    case MP_FOLD_MIN: return sym_less(a, b, true) == 1 ? a : sym_less(b, a, true) == 1 ? b : SYM_UNKNOWN;
    default: return SYM_UNKNOWN;
    }
}

/* Sets output 0 from entries: konst of dtype t when all are known, else a
 * symbolic shape vector (int32/int64 only) when some entry is still a dim. */
static int sym_write(mp_graph *g, const mp_node *n, const sym_entry *e, int count, int rank, mp_dtype t)
{
    bool all = true, any = false;
    for (int i = 0; i < count; i++) {
        all = all && e[i].known;
        any = any || e[i].known || e[i].sym >= 0;
    }
    if (all) {
        int64_t len = count;
        mp_tensor *k = mp_tensor_new(g->arena, t, rank, &len);
        for (int i = 0; i < count; i++) mp_tensor_set_i64(k, i, e[i].v);
        return mp_set_out_const(g, n, 0, k);
    }
    if (!any || (t != MP_INT64 && t != MP_INT32)) return 0;
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < count; i++) {
        if (!e[i].known) d[i] = (mp_dim){-1, e[i].sym};
        else d[i] = e[i].v >= 0 ? mp_dim_of(e[i].v) : (mp_dim){e[i].v, MP_SYM_LITERAL};
    }
    mp_set_out_dims(g, n, 0, d, count, rank == 0);
    mp_value *y = mp_out(g, n, 0);
    if (y && t != MP_INT64) mp_value_set(g, n->out[0], t, y->rank, y->dims);
    return 0;
}

/* Entry-wise op (or Where when nv == 3) over 0-D/1-D shape vectors of which
 * at least one is symbolic; leaves the output alone when it cannot. */
static int fold_symbolic(mp_graph *g, const mp_node *n, mp_fold_op op, int nv, mp_value *const *vs)
{
    sym_entry in[3][MP_MAX_RANK], out[MP_MAX_RANK];
    int len[3], count = 1, rank = 0;
    bool sym = false;
    mp_value *y = mp_out(g, n, 0);
    if (!y || (!mp_dtype_is_int(y->dtype) && y->dtype != MP_BOOL)) return 0;
    for (int k = 0; k < nv; k++) {
        len[k] = sym_read(g, vs[k], in[k]);
        if (len[k] < 0) return 0;
        sym = sym || !vs[k]->konst;
        if (vs[k]->rank > rank) rank = vs[k]->rank;
        if (len[k] != 1) {
            if (count != 1 && count != len[k]) return 0;
            count = len[k];
        }
    }
    if (!sym) return 0;
    for (int i = 0; i < count; i++) {
        sym_entry e[3];
        for (int k = 0; k < nv; k++) e[k] = in[k][len[k] == 1 ? 0 : i];
        if (nv == 3) {
            bool same = e[1].known == e[2].known && e[1].v == e[2].v && e[1].sym == e[2].sym &&
                        (e[1].known || e[1].sym >= 0);
            out[i] = e[0].known ? (e[0].v ? e[1] : e[2]) : same ? e[1] : SYM_UNKNOWN;
        } else {
            out[i] = sym_binary(op, e[0], e[1]);
        }
    }
    return sym_write(g, n, out, count, rank, y->dtype);
}

/* ---- unary ----------------------------------------------------------------------- */

static void read_params(const mp_node *n, const elem_rule *r, double *p)
{
    for (int k = 0; k < 2; k++)
        p[k] = r->attr[k] && mp_node_attr(n, r->attr[k]) ? mp_attr_float(n, r->attr[k], 0) : r->dflt[k];
}

int shape_Unary(mp_graph *g, mp_node *n, mp_err *err)
{
    const elem_rule *r = &elem_rules[op_of(n)];
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (check_type(n, x, "X", r->types, err)) return -1;
    mp_set_out_like(g, n, 0, r->to_bool ? MP_BOOL : x->dtype, x);
    mp_fold_op op = r->fold;
    if (op_of(n) == MP_OP_Gelu) {
        const char *ap = mp_attr_str(n, "approximate", "none");
        if (strcmp(ap, "none") && strcmp(ap, "tanh"))
            return mp_fail(err, "attribute approximate is '%s'; expected 'none' or 'tanh'", ap);
        if (!strcmp(ap, "tanh")) op = MP_FOLD_GELU_TANH;
    }
    double p[2];
    read_params(n, r, p);
    fold_known(g, n, op, 1, &x, p);
    return 0;
}

/* ---- binary and variadic ---------------------------------------------------------- */

static bool sym_op(mp_fold_op op)
{
    switch (op) {
    case MP_FOLD_ADD: case MP_FOLD_SUB: case MP_FOLD_MUL: case MP_FOLD_DIV: case MP_FOLD_EQ: case MP_FOLD_LT:
    case MP_FOLD_LE: case MP_FOLD_GT: case MP_FOLD_GE: case MP_FOLD_MAX: case MP_FOLD_MIN: return true;
    default: return false;
    }
}

int shape_Binary(mp_graph *g, mp_node *n, mp_err *err)
{
    int id = op_of(n);
    const elem_rule *r = &elem_rules[id];
    mp_value *v[2] = {mp_in(g, n, 0), mp_in(g, n, 1)};
    if (!v[0] || !v[1]) return mp_fail(err, "needs two inputs, A and B");
    if (check_type(n, v[0], "A", r->types, err) || check_type(n, v[1], "B", r->types, err)) return -1;
    /* only Pow's exponent may differ in dtype from its base */
    bool mixed = id == MP_OP_Pow;
    if (!mixed && check_same_type(n, 2, v, err)) return -1;

    mp_fold_op op = r->fold;
    if (id == MP_OP_Mod && mp_attr_int(n, "fmod", 0)) op = MP_FOLD_FMOD;
    if (id == MP_OP_BitShift) {
        const char *dir = mp_attr_str(n, "direction", "");
        if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
            return mp_fail(err, "attribute direction is '%s'; expected 'LEFT' or 'RIGHT'", dir);
        op = !strcmp(dir, "LEFT") ? MP_FOLD_SHL : MP_FOLD_SHR;
    }

    mp_dtype t = r->to_bool ? MP_BOOL : mixed ? v[0]->dtype : first_dtype(2, v);
    /* Before opset 7, B went to A: from attribute axis on (Add's broadcast=1),
     * or per channel (PRelu's slope on axis 1). The output is A's shape. */
    int64_t opset = mp_graph_opset(g, n->domain);
    bool legacy = opset > 0 && opset < 7 && (id == MP_OP_PRelu ? v[1]->rank != 0 : mp_node_attr(n, "axis") != NULL);
    if (legacy) return mp_set_out_like(g, n, 0, t, v[0]);

    int rank;
    mp_dim dims[MP_MAX_RANK];
    if (broadcast(g, 2, v, &rank, dims, err)) return -1;
    if (id == MP_OP_PRelu && v[0]->rank >= 0) {
        /* the slope broadcasts to X, never X to the slope */
        bool to_x = rank == v[0]->rank;
        for (int k = 0; to_x && k < rank; k++)
            to_x = !(dims[k].v >= 0 && v[0]->dims[k].v >= 0 && dims[k].v != v[0]->dims[k].v);
        if (!to_x) return mp_fail(err, "slope '%s' does not broadcast to the shape of X '%s'", v[1]->name, v[0]->name);
    }
    mp_set_out(g, n, 0, t, rank, dims);
    if (!fold_known(g, n, op, 2, v, NULL) && sym_op(op)) fold_symbolic(g, n, op, 2, v);
    return 0;
}

int shape_Variadic(mp_graph *g, mp_node *n, mp_err *err)
{
    int id = op_of(n);
    const elem_rule *r = &elem_rules[id];
    if (n->nin < 1 || !mp_in(g, n, 0)) return mp_fail(err, "needs at least one input");
    mp_value **v = mp_arena_alloc(g->arena, (size_t)n->nin * sizeof *v);
    for (int k = 0; k < n->nin; k++) {
        v[k] = mp_in(g, n, k);
        if (!v[k]) return mp_fail(err, "input %d is omitted", k);
        if (check_type(n, v[k], "data_0", r->types, err)) return -1;
    }
    if (check_same_type(n, n->nin, v, err)) return -1;
    int rank;
    mp_dim dims[MP_MAX_RANK];
    if (broadcast(g, n->nin, v, &rank, dims, err)) return -1;
    mp_set_out(g, n, 0, first_dtype(n->nin, v), rank, dims);

    /* fold pairwise left to right; Mean divides the sum at the end */
    mp_value *y = mp_out(g, n, 0);
    bool known = y && mp_foldable_numel(y) >= 0;
    for (int k = 0; k < n->nin && known; k++) known = v[k]->konst != NULL;
    if (known && mp_fold_dtype_ok(y->dtype)) {
        mp_tensor *acc = v[0]->konst;
        for (int k = 1; k < n->nin && acc; k++) {
            const mp_tensor *pair[2] = {acc, v[k]->konst};
            acc = mp_fold_map(g->arena, r->fold, 2, pair, NULL, y->dtype);
        }
        if (acc && id == MP_OP_Mean) {
            mp_tensor *cnt = mp_tensor_new(g->arena, y->dtype, 0, NULL);
            mp_tensor_set_f64(cnt, 0, n->nin);
            const mp_tensor *pair[2] = {acc, cnt};
            acc = mp_fold_map(g->arena, MP_FOLD_DIV, 2, pair, NULL, y->dtype);
        }
        if (acc) return mp_set_out_const(g, n, 0, acc);
    }
    if (n->nin == 2 && id != MP_OP_Mean) fold_symbolic(g, n, r->fold, 2, v);
    return 0;
}

int shape_Where(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *v[3] = {mp_in(g, n, 0), mp_in(g, n, 1), mp_in(g, n, 2)};
    if (!v[0] || !v[1] || !v[2]) return mp_fail(err, "needs three inputs: condition, X, Y");
    if (check_type(n, v[0], "condition", T_B, err) || check_same_type(n, 2, v + 1, err)) return -1;
    int rank;
    mp_dim dims[MP_MAX_RANK];
    if (broadcast(g, 3, v, &rank, dims, err)) return -1;
    mp_set_out(g, n, 0, first_dtype(2, v + 1), rank, dims);
    mp_value *y = mp_out(g, n, 0);
    if (!y || mp_foldable_numel(y) < 0) return 0;
    if (v[0]->konst && v[1]->konst && v[2]->konst) {
        mp_tensor *t = mp_fold_where(g->arena, v[0]->konst, v[1]->konst, v[2]->konst);
        if (t) return mp_set_out_const(g, n, 0, t);
    }
    return fold_symbolic(g, n, MP_FOLD_IDENTITY, 3, v);
}

/* Clip: bounds are attributes before opset 11, optional inputs from it on. */
int shape_Clip(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    if (check_type(n, x, "input", T_N, err)) return -1;
    mp_set_out_like(g, n, 0, x->dtype, x);
    mp_value *y = mp_out(g, n, 0);
    if (!x->konst || !y || mp_foldable_numel(y) < 0 || !mp_fold_dtype_ok(x->dtype)) return 0;

    const mp_tensor *bound[2] = {NULL, NULL}; /* min, max */
    int64_t opset = mp_graph_opset(g, n->domain);
    if (opset > 0 && opset < 11) {
        const char *names[2] = {"min", "max"};
        for (int k = 0; k < 2; k++) {
            if (!mp_node_attr(n, names[k])) continue;
            mp_tensor *b = mp_tensor_new(g->arena, x->dtype, 0, NULL);
            mp_tensor_set_f64(b, 0, mp_attr_float(n, names[k], 0));
            bound[k] = b;
        }
    } else {
        for (int k = 0; k < 2; k++) {
            mp_value *b = mp_in(g, n, k + 1);
            if (b && !b->konst) return 0;
            if (b && b->konst->numel != 1)
                return mp_fail(err, "bound '%s' must be a scalar, has %lld elements", b->name,
                               (long long)b->konst->numel);
            bound[k] = b ? b->konst : NULL;
        }
    }
    mp_tensor *t = x->konst;
    if (t && bound[0]) t = mp_fold_map(g->arena, MP_FOLD_MAX, 2, (const mp_tensor *[]){t, bound[0]}, NULL, x->dtype);
    if (t && bound[1]) t = mp_fold_map(g->arena, MP_FOLD_MIN, 2, (const mp_tensor *[]){t, bound[1]}, NULL, x->dtype);
    if (t) mp_set_out_const(g, n, 0, t);
    return 0;
}

/* ---- casts ---------------------------------------------------------------------------- */

/* Reads a dtype attribute (Cast to, Random* dtype); dflt when absent
 * (MP_UNDEFINED: the attribute is required). */
static int attr_dtype(const mp_node *n, const char *name, mp_dtype dflt, mp_dtype *out, mp_err *err)
{
    const mp_attr *a = mp_node_attr(n, name);
    if (!a && dflt == MP_UNDEFINED) return mp_fail(err, "missing attribute '%s'", name);
    if (a && (a->type != MP_ATTR_INT || !mp_dtype_valid((int)a->i)))
        return mp_fail(err, "attribute %s = %lld is not a tensor element type", name, (long long)a->i);
    *out = a ? (mp_dtype)a->i : dflt;
    return 0;
}

/* Cast (to = attribute) and CastLike (to = dtype of input 2). */
int shape_Cast(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    mp_dtype to = MP_UNDEFINED;
    if (op_of(n) == MP_OP_CastLike) {
        mp_value *like = mp_in(g, n, 1);
        if (!like) return mp_fail(err, "missing input target_type");
        to = like->dtype;
    } else if (attr_dtype(n, "to", MP_UNDEFINED, &to, err)) {
        return -1;
    }
    mp_set_out_like(g, n, 0, to, x);
    mp_value *y = mp_out(g, n, 0);
    if (!y || to == MP_UNDEFINED) return 0;
    if (x->konst && mp_foldable_numel(y) >= 0) {
        mp_tensor *t = mp_fold_cast(g->arena, x->konst, to);
        if (t) return mp_set_out_const(g, n, 0, t);
    }
    /* a shape vector keeps its entries through integer casts (int64 <-> int32) */
    sym_entry e[MP_MAX_RANK];
    int count = mp_dtype_is_int(to) && mp_dtype_is_int(x->dtype) && !x->konst ? sym_read(g, x, e) : -1;
    if (count >= 0) return sym_write(g, n, e, count, x->rank, to);
    return 0;
}

/* BitCast: same bit pattern, same shape; widths must match. */
int shape_BitCast(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    mp_dtype to = MP_UNDEFINED;
    if (attr_dtype(n, "to", MP_UNDEFINED, &to, err)) return -1;
    if (to == MP_STRING || x->dtype == MP_STRING) return mp_fail(err, "strings have no bit pattern to reinterpret");
    if (x->dtype != MP_UNDEFINED && mp_dtype_bits(x->dtype) != mp_dtype_bits(to))
        return mp_fail(err, "cannot reinterpret %s (%d bits) as %s (%d bits): widths differ", mp_dtype_name(x->dtype),
                       mp_dtype_bits(x->dtype), mp_dtype_name(to), mp_dtype_bits(to));
    mp_set_out_like(g, n, 0, to, x);
    mp_value *y = mp_out(g, n, 0);
    int bits = mp_dtype_bits(to);
    if (x->konst && y && mp_foldable_numel(y) >= 0 && bits % 8 == 0) {
        mp_tensor *t = mp_tensor_new(g->arena, to, x->konst->rank, x->konst->dims);
        memcpy(t->data, x->konst->data, (size_t)t->numel * (size_t)(bits / 8));
        return mp_set_out_const(g, n, 0, t);
    }
    return 0;
}

/* ---- random generators ----------------------------------------------------------------- */

/* RandomUniform, RandomNormal: shape and dtype from attributes. */
int shape_Random(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_dtype t = MP_FLOAT;
    if (attr_dtype(n, "dtype", MP_FLOAT, &t, err)) return -1;
    const int64_t *shape;
    int rank = mp_attr_ints(n, "shape", &shape);
    if (rank < 0) return mp_fail(err, "missing attribute 'shape'");
    if (rank > MP_MAX_RANK) return mp_fail(err, "shape has %d dims (limit %d)", rank, MP_MAX_RANK);
    mp_dim dims[MP_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) return mp_fail(err, "shape[%d] = %lld is negative", i, (long long)shape[i]);
        dims[i] = mp_dim_of(shape[i]);
    }
    return mp_set_out(g, n, 0, t, rank, dims);
}

/* RandomUniformLike, RandomNormalLike, Bernoulli: shape of the input, dtype
 * from the attribute or else the input's. */
int shape_RandomLike(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    mp_dtype t = x->dtype;
    if (mp_node_attr(n, "dtype") && attr_dtype(n, "dtype", MP_FLOAT, &t, err)) return -1;
    return mp_set_out_like(g, n, 0, t, x);
}

/* Multinomial: [batch, classes] -> [batch, sample_size]. */
int shape_Multinomial(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    if (x->rank >= 0 && x->rank != 2)
        return mp_fail(err, "input must be [batch_size, class_size], has rank %d", x->rank);
    mp_dtype t = MP_INT32;
    if (attr_dtype(n, "dtype", MP_INT32, &t, err)) return -1;
    if (t != MP_INT32 && t != MP_INT64) return mp_fail(err, "dtype must be int32 or int64, not %s", mp_dtype_name(t));
    int64_t samples = mp_attr_int(n, "sample_size", 1);
    if (samples < 0) return mp_fail(err, "sample_size %lld is negative", (long long)samples);
    mp_dim dims[2] = {x->rank == 2 ? x->dims[0] : MP_DIM_UNKNOWN, mp_dim_of(samples)};
    return mp_set_out(g, n, 0, t, 2, dims);
}

/* ---- strings ------------------------------------------------------------------------------ */

static bool known_strings(const mp_value *v)
{
    return v && v->konst && v->konst->dtype == MP_STRING && v->konst->data;
}

static const char *str_at(const mp_tensor *t, int64_t i)
{
    const char *s = ((const char *const *)t->data)[i];
    return s ? s : "";
}

int shape_StringConcat(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *v[2] = {mp_in(g, n, 0), mp_in(g, n, 1)};
    if (!v[0] || !v[1]) return mp_fail(err, "needs two inputs, X and Y");
    if (check_type(n, v[0], "X", MP_T(MP_STRING), err) || check_type(n, v[1], "Y", MP_T(MP_STRING), err)) return -1;
    int rank;
    mp_dim dims[MP_MAX_RANK];
    if (broadcast(g, 2, v, &rank, dims, err)) return -1;
    mp_set_out(g, n, 0, MP_STRING, rank, dims);
    if (!known_strings(v[0]) || !known_strings(v[1]) || mp_foldable_numel(mp_out(g, n, 0)) < 0) return 0;
    const mp_tensor *ts[2] = {v[0]->konst, v[1]->konst};
    int64_t od[MP_MAX_RANK];
    if (!mp_fold_bcast_shape(2, ts, &rank, od)) return 0;
    mp_tensor *t = mp_tensor_new(g->arena, MP_STRING, rank, od);
    for (int64_t i = 0; i < t->numel; i++) {
        const char *a = str_at(ts[0], mp_fold_bcast_index(ts[0], rank, od, i));
        const char *b = str_at(ts[1], mp_fold_bcast_index(ts[1], rank, od, i));
        size_t la = strlen(a), lb = strlen(b);
        char *s = mp_arena_alloc(g->arena, la + lb + 1);
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
        ((const char **)t->data)[i] = s;
    }
    return mp_set_out_const(g, n, 0, t);
}

int shape_RegexFullMatch(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (check_type(n, x, "X", MP_T(MP_STRING), err)) return -1;
    return mp_set_out_like(g, n, 0, MP_BOOL, x);
}

static bool is_stopword(const mp_node *n, const char *s, bool case_sensitive)
{
    const mp_attr *a = mp_node_attr(n, "stopwords");
    for (int i = 0; a && a->type == MP_ATTR_STRINGS && i < a->n; i++)
        if (case_sensitive ? !strcmp(a->strings[i], s) : !strcasecmp(a->strings[i], s)) return true;
    return false;
}

/* StringNormalizer: [C] or [1, C]; drops stopwords, so C shrinks (to an empty
 * string [1] when nothing is left), then changes case (ASCII letters). */
int shape_StringNormalizer(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (check_type(n, x, "X", MP_T(MP_STRING), err)) return -1;
    if (x->rank >= 0 && x->rank != 1 && !(x->rank == 2 && (x->dims[0].v == 1 || x->dims[0].v < 0)))
        return mp_fail(err, "input must be [C] or [1, C], has rank %d", x->rank);
    const char *action = mp_attr_str(n, "case_change_action", "NONE");
    if (strcmp(action, "NONE") && strcmp(action, "LOWER") && strcmp(action, "UPPER"))
        return mp_fail(err, "case_change_action is '%s'; expected NONE, LOWER or UPPER", action);
    const mp_attr *stop = mp_node_attr(n, "stopwords");
    bool stops = stop && stop->type == MP_ATTR_STRINGS && stop->n > 0;
    if (!known_strings(x)) {
        mp_set_out_like(g, n, 0, MP_STRING, x);
        mp_value *y = mp_out(g, n, 0);
        if (y && y->rank > 0 && stops) y->dims[y->rank - 1] = MP_DIM_UNKNOWN;
        return 0;
    }
    /* known input: compute the result */
    const mp_tensor *in = x->konst;
    bool cs = mp_attr_int(n, "is_case_sensitive", 0) != 0;
    int64_t kept = 0;
    const char **out = mp_arena_alloc(g->arena, (size_t)(in->numel + 1) * sizeof *out);
    for (int64_t i = 0; i < in->numel; i++) {
        if (is_stopword(n, str_at(in, i), cs)) continue;
        char *s = mp_arena_strdup(g->arena, str_at(in, i));
        for (char *c = s; *c && action[0] != 'N'; c++)
            *c = (char)(action[0] == 'L' ? tolower((unsigned char)*c) : toupper((unsigned char)*c));
        out[kept++] = s;
    }
    if (kept == 0) out[kept++] = "";
    int64_t dims[2] = {1, kept};
    mp_tensor *t = mp_tensor_new(g->arena, MP_STRING, x->rank, x->rank == 2 ? dims : dims + 1);
    memcpy(t->data, out, (size_t)kept * sizeof *out);
    return mp_set_out_const(g, n, 0, t);
}

/* Splits s as Python's str.split(delim, maxsplit) does (delim "" = runs of
 * whitespace, maxsplit < 0 = no limit); stores up to max parts into parts
 * (when not NULL) and returns the part count. */
static int64_t split_string(mp_arena *a, const char *s, const char *delim, int64_t maxsplit, const char **parts,
                            int64_t max)
{
    size_t dl = strlen(delim);
    int64_t count = 0;
    for (;;) {
        if (!dl) {
            while (isspace((unsigned char)*s)) s++;
            if (!*s) return count;
        }
        const char *end = NULL; /* NULL: the part runs to the end of s */
        if (maxsplit < 0 || count < maxsplit) {
            if (dl) {
                end = strstr(s, delim);
            } else {
                for (end = s; *end && !isspace((unsigned char)*end); end++) {}
                if (!*end) end = NULL;
            }
        }
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (parts && count < max) parts[count] = mp_arena_strndup(a, s, len);
        count++;
        if (!end) return count;
        s = end + dl;
    }
}

/* StringSplit: Y = X's shape + [most parts] (padded with ""), Z = part counts. */
int shape_StringSplit(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (check_type(n, x, "X", MP_T(MP_STRING), err)) return -1;
    if (x->rank >= MP_MAX_RANK) return mp_fail(err, "rank %d leaves no room for the split axis", x->rank);
    mp_set_out_like(g, n, 1, MP_INT64, x);
    mp_dim dims[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = x->dims[i];
    if (x->rank >= 0) dims[x->rank] = MP_DIM_UNKNOWN;
    mp_set_out(g, n, 0, MP_STRING, x->rank >= 0 ? x->rank + 1 : -1, dims);
    if (!known_strings(x) || x->konst->numel > MP_FOLD_MAX_ELEMS) return 0;

    const mp_tensor *in = x->konst;
    const char *delim = mp_attr_str(n, "delimiter", "");
    int64_t maxsplit = mp_node_attr(n, "maxsplit") ? mp_attr_int(n, "maxsplit", 0) : -1;
    mp_tensor *z = mp_tensor_new(g->arena, MP_INT64, in->rank, in->dims);
    int64_t most = 0, numel;
    for (int64_t i = 0; i < in->numel; i++) {
        int64_t c = split_string(g->arena, str_at(in, i), delim, maxsplit, NULL, 0);
        ((int64_t *)z->data)[i] = c;
        if (c > most) most = c;
    }
    int64_t ydims[MP_MAX_RANK];
    memcpy(ydims, in->dims, (size_t)in->rank * sizeof *ydims);
    ydims[in->rank] = most;
    if (!mp_mul_ok(in->numel, most, &numel) || numel > MP_FOLD_MAX_ELEMS) {
        dims[x->rank] = mp_dim_of(most);
        mp_set_out(g, n, 0, MP_STRING, x->rank + 1, dims);
        return mp_set_out_const(g, n, 1, z);
    }
    mp_tensor *y = mp_tensor_new(g->arena, MP_STRING, in->rank + 1, ydims);
    const char **parts = y->data;
    for (int64_t i = 0; i < numel; i++) parts[i] = "";
    for (int64_t i = 0; i < in->numel; i++)
        split_string(g->arena, str_at(in, i), delim, maxsplit, parts + i * most, most);
    mp_set_out_const(g, n, 0, y);
    return mp_set_out_const(g, n, 1, z);
}
