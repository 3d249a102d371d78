/* shape_control.c - shape rules of control flow (If, Loop, Scan, SequenceMap),
 * sequences and optionals (ir/ops/control.def).
 *
 * A subgraph is inferred like a function call: the rule types the body's
 * formal inputs, runs mp_infer_subgraph() and reads the body's outputs.
 * Loop and Scan feed some outputs back as the next iteration's inputs, so
 * their bodies are inferred until those carried types stop changing (each
 * pass can only forget facts, so it ends). A Loop whose trip count and
 * condition are known is also run iteration by iteration, within a budget,
 * which gives exact shapes where they depend on the iteration number.
 *
 * A sequence value's dtype/shape describe its elements (a dim is kept where
 * all elements agree) and seqlen counts them; an optional's describe what it
 * holds, elem_kind says whether that is a tensor or a sequence.
 */
#include <string.h>

#include "infer.h" /* mp_infer_subgraph */
#include "shape.h"

/* Body node evaluations one Loop may spend on running iterations one by one. */
#define LOOP_UNROLL_NODES (1 << 13)
/* Passes before a carried type that keeps changing is widened to "any shape". */
#define SETTLE_PASSES 8
/* Longest sequence whose elements are typed one by one. */
#define SEQ_TRACK_MAX 256

/* ---- value types, moved between a node and its subgraphs ---------------- */

typedef struct ctl_type {
    mp_value_kind kind, elem_kind;
    mp_dtype dtype;
    int rank;
    const mp_dim *dims; /* rank entries, in the arena */
    int64_t seqlen;
    const mp_type *elems; /* seqlen element types, or NULL */
    mp_tensor *konst;     /* only where a value itself moves (taken If branch, unrolled Loop) */
    mp_dim *symdata;
    int32_t nsymdata;
} ctl_type;

static const char *kind_name(mp_value_kind k)
{
    static const char *const names[] = {"tensor", "sequence", "optional", "map", "sparse tensor", "value"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "value";
}

static ctl_type type_unknown(mp_value_kind kind)
{
    return (ctl_type){.kind = kind, .elem_kind = MP_KIND_TENSOR, .rank = -1, .seqlen = -1};
}

static ctl_type type_of(const mp_value *v, bool with_konst)
{
    if (!v) return type_unknown(MP_KIND_TENSOR);
    ctl_type t = {v->kind, v->elem_kind, v->dtype, v->rank, v->dims, v->seqlen, v->elems, NULL, NULL, 0};
    if (with_konst) {
        t.konst = v->konst;
        t.symdata = v->symdata;
        t.nsymdata = v->nsymdata;
    }
    return t;
}

static void type_put(mp_graph *g, int32_t id, const ctl_type *t)
{
    mp_value *v = mp_val(g, id);
    if (!v) return;
    mp_value_set(g, id, t->dtype, t->rank, t->dims);
    v->kind = t->kind;
    v->elem_kind = t->elem_kind;
    v->seqlen = t->seqlen;
    v->elems = (mp_type *)t->elems;
    v->konst = t->konst;
    v->symdata = t->symdata;
    v->nsymdata = t->nsymdata;
}

static void out_put(mp_graph *g, const mp_node *n, int i, const ctl_type *t)
{
    if (i < n->nout) type_put(g, n->out[i], t);
}

/* Nothing known, not even the kind (a value no rule has typed). */
static bool untyped(const ctl_type *t) { return t->kind == MP_KIND_TENSOR && t->dtype == MP_UNDEFINED && t->rank < 0; }
static bool holds_seq(const ctl_type *t)
{
    return t->kind == MP_KIND_SEQUENCE || (t->kind == MP_KIND_OPTIONAL && t->elem_kind == MP_KIND_SEQUENCE);
}

static bool dims_equal(int rank, const mp_dim *a, const mp_dim *b)
{
    for (int i = 0; i < rank; i++)
        if (a[i].v != b[i].v || a[i].sym != b[i].sym) return false;
    return true;
}

static bool type_equal(const ctl_type *a, const ctl_type *b)
{
    if (a->kind != b->kind || a->elem_kind != b->elem_kind || a->dtype != b->dtype || a->rank != b->rank ||
        a->seqlen != b->seqlen || !a->elems != !b->elems || !dims_equal(a->rank, a->dims, b->dims))
        return false;
    for (int64_t i = 0; a->elems && i < a->seqlen; i++)
        if (a->elems[i].dtype != b->elems[i].dtype || a->elems[i].rank != b->elems[i].rank ||
            !dims_equal(a->elems[i].rank, a->elems[i].dims, b->elems[i].dims))
            return false;
    return true;
}

/* Tensors that are a's or b's: out gets their dtype and the dims they agree on. */
static int tensor_union(mp_graph *g, const ctl_type *a, const ctl_type *b, ctl_type *out, mp_err *err)
{
    if (a->dtype != MP_UNDEFINED && b->dtype != MP_UNDEFINED && a->dtype != b->dtype)
        return mp_fail(err, "element types differ (%s vs %s)", mp_dtype_name(a->dtype), mp_dtype_name(b->dtype));
    mp_dtype t = a->dtype == b->dtype ? a->dtype : MP_UNDEFINED;
    if (a->rank < 0 || a->rank != b->rank) {
        out->dtype = t;
        out->rank = -1;
        out->dims = NULL;
        return 0;
    }
    mp_dim *d = mp_arena_alloc(g->arena, (size_t)(a->rank ? a->rank : 1) * sizeof *d);
    for (int i = 0; i < a->rank; i++) d[i] = mp_dim_same(a->dims[i], b->dims[i]) ? a->dims[i] : MP_DIM_UNKNOWN;
    out->dtype = t;
    out->rank = a->rank;
    out->dims = d;
    return 0;
}

/* ---- sequence elements ---- */

static mp_type elem_of(const ctl_type *t)
{
    return (mp_type){MP_KIND_TENSOR, MP_KIND_TENSOR, t->dtype, t->rank, (mp_dim *)t->dims};
}

static ctl_type elem_type(const mp_type *e)
{
    ctl_type t = type_unknown(MP_KIND_TENSOR);
    t.dtype = e->dtype;
    t.rank = e->rank;
    t.dims = e->dims;
    return t;
}

static mp_type *elems_new(mp_graph *g, int64_t n)
{
    return mp_arena_alloc(g->arena, (size_t)(n ? n : 1) * sizeof(mp_type));
}

/* Sets s's element dtype/shape to what all n elements share. */
static int elems_merge(mp_graph *g, const mp_type *e, int64_t n, ctl_type *s, mp_err *err)
{
    for (int64_t i = 0; i < n; i++) {
        ctl_type x = elem_type(&e[i]);
        if (i == 0) {
            s->dtype = x.dtype;
            s->rank = x.rank;
            s->dims = x.dims;
        } else if (tensor_union(g, s, &x, s, err)) {
            return -1;
        }
    }
    return 0;
}

/* The type of a value that is either a or b (an If's two branches, a carried
 * value before and after an iteration). Contents are dropped. */
static int type_union(mp_graph *g, const ctl_type *a0, const ctl_type *b0, ctl_type *out, mp_err *err)
{
    ctl_type a = *a0, b = *b0;
    if (untyped(&a) || untyped(&b)) {
        *out = type_unknown(untyped(&a) ? b.kind : a.kind);
        return 0;
    }
    /* an optional or what it may hold is still an optional */
    if (a.kind == MP_KIND_OPTIONAL && b.kind != MP_KIND_OPTIONAL) {
        b.elem_kind = b.kind;
        b.kind = MP_KIND_OPTIONAL;
    } else if (b.kind == MP_KIND_OPTIONAL && a.kind != MP_KIND_OPTIONAL) {
        a.elem_kind = a.kind;
        a.kind = MP_KIND_OPTIONAL;
    }
    if (a.kind != b.kind) return mp_fail(err, "one is a %s, the other a %s", kind_name(a.kind), kind_name(b.kind));
    ctl_type u = type_unknown(a.kind);
    u.elem_kind = a.elem_kind;
    if (a.kind == MP_KIND_OPTIONAL && a.elem_kind != b.elem_kind) {
        bool a_open = a.dtype == MP_UNDEFINED && a.rank < 0, b_open = b.dtype == MP_UNDEFINED && b.rank < 0;
        if (!a_open && !b_open)
            return mp_fail(err, "one holds a %s, the other a %s", kind_name(a.elem_kind), kind_name(b.elem_kind));
        u.elem_kind = a_open ? b.elem_kind : a.elem_kind;
        *out = u;
        return 0;
    }
    if (holds_seq(&a)) {
        u.seqlen = a.seqlen == b.seqlen ? a.seqlen : -1;
        if (u.seqlen >= 0 && a.elems && b.elems) { /* element by element */
            mp_type *e = elems_new(g, u.seqlen);
            for (int64_t i = 0; i < u.seqlen; i++) {
                ctl_type x = elem_type(&a.elems[i]), y = elem_type(&b.elems[i]);
                if (tensor_union(g, &x, &y, &x, err)) return -1;
                e[i] = elem_of(&x);
            }
            u.elems = e;
        }
        if (a.seqlen == 0 || b.seqlen == 0) { /* an empty sequence adds no elements */
            if (tensor_union(g, &a, &b, &u, err)) return -1;
            const ctl_type *full = a.seqlen == 0 ? &b : &a;
            u.rank = full->rank;
            u.dims = full->dims;
            *out = u;
            return 0;
        }
    }
    if (tensor_union(g, &a, &b, &u, err)) return -1;
    *out = u;
    return 0;
}

/* t with dim d inserted before axis (0..rank); unknown rank stays unknown. */
static int type_insert_dim(mp_graph *g, const ctl_type *t, int axis, mp_dim d, ctl_type *out, mp_err *err)
{
    *out = *t;
    out->elems = NULL;
    out->konst = NULL;
    out->symdata = NULL;
    out->nsymdata = 0;
    if (t->rank < 0) return 0;
    if (t->rank + 1 > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", t->rank + 1, MP_MAX_RANK);
    mp_dim *dims = mp_arena_alloc(g->arena, (size_t)(t->rank + 1) * sizeof *dims);
    for (int i = 0, k = 0; i <= t->rank; i++) dims[i] = i == axis ? d : t->dims[k++];
    out->rank = t->rank + 1;
    out->dims = dims;
    return 0;
}

/* t without dim axis; unknown rank stays unknown. */
static ctl_type type_drop_dim(mp_graph *g, const ctl_type *t, int axis)
{
    ctl_type out = *t;
    out.elems = NULL;
    out.konst = NULL;
    out.symdata = NULL;
    out.nsymdata = 0;
    if (t->rank <= 0) return out;
    mp_dim *dims = mp_arena_alloc(g->arena, (size_t)t->rank * sizeof *dims);
    for (int i = 0, k = 0; i < t->rank; i++)
        if (i != axis) dims[k++] = t->dims[i];
    out.rank = t->rank - 1;
    out.dims = dims;
    return out;
}

/* 1 or 0 for a known boolean scalar, -1 when not known. */
static int const_bool(const mp_value *v)
{
    int64_t x;
    return v && mp_const_ints(v, &x, 1) == 1 ? x != 0 : -1;
}

/* ---- subgraphs ------------------------------------------------------------ */

static mp_graph *graph_attr(const mp_node *n, const char *name, mp_err *err)
{
    const mp_attr *a = mp_node_attr(n, name);
    if (!a || a->type != MP_ATTR_GRAPH || !a->graphs || !a->graphs[0]) {
        mp_fail(err, "missing graph attribute '%s'", name);
        return NULL;
    }
    return a->graphs[0];
}

/* Forgets what an earlier pass folded in the body: rules overwrite types but
 * leave contents they cannot fold this time. Initializers and outer names
 * keep theirs; nested subgraphs are cleared by their own node's rule. */
static void body_forget(mp_graph *b)
{
    for (int32_t i = 0; i < b->nvalues; i++) {
        mp_value *v = &b->values[i];
        if (v->flags & (MP_VAL_INITIALIZER | MP_VAL_OUTER)) continue;
        v->konst = NULL;
        v->symdata = NULL;
        v->nsymdata = 0;
    }
}

/* Types the body's formal inputs as in[] and infers it. */
static int body_run(mp_graph *b, const ctl_type *in, mp_err *err)
{
    body_forget(b);
    for (int32_t i = 0; i < b->ninputs; i++) type_put(b, b->inputs[i], &in[i]);
    mp_err inner;
    inner.msg[0] = 0;
    if (mp_infer_subgraph(b, &inner)) return mp_fail(err, "in subgraph '%s': %s", b->name, inner.msg);
    return 0;
}

static ctl_type body_out(mp_graph *b, int k, bool with_konst) { return type_of(mp_val(b, b->outputs[k]), with_konst); }

/* Infers a body whose outputs first_out+k come back as its inputs first_in+k
 * on the next iteration, widening those input types (in[], updated) by union
 * until a pass changes none. */
static int body_settle(mp_graph *g, mp_graph *b, ctl_type *in, int first_in, int first_out, int ncarry, mp_err *err)
{
    for (int pass = 0;; pass++) {
        if (body_run(b, in, err)) return -1;
        bool changed = false;
        for (int k = 0; k < ncarry; k++) {
            ctl_type *c = &in[first_in + k], o = body_out(b, first_out + k, false), u;
            mp_err e;
            if (type_union(g, c, &o, &u, &e))
                return mp_fail(err, "carried value '%s' of subgraph '%s' changes type in an iteration: %s",
                               mp_val(b, b->inputs[first_in + k])->name, b->name, e.msg);
            if (!type_equal(&u, c)) {
                *c = u;
                changed = true;
            }
        }
        if (!changed) return 0;
        if (pass > SETTLE_PASSES + 2) return mp_fail(err, "the carried types of subgraph '%s' do not settle", b->name);
        if (pass >= SETTLE_PASSES)
            for (int k = 0; k < ncarry; k++) {
                in[first_in + k].rank = -1;
                in[first_in + k].seqlen = -1;
                in[first_in + k].elems = NULL;
            }
    }
}

/* ---- If ---------------------------------------------------------------------- */

int shape_If(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_graph *br[2] = {graph_attr(n, "else_branch", err), NULL};
    if (!br[0] || !(br[1] = graph_attr(n, "then_branch", err))) return -1;
    if (br[0]->noutputs != br[1]->noutputs || n->nout > br[1]->noutputs)
        return mp_fail(err, "then_branch gives %d outputs, else_branch %d, the node has %d", br[1]->noutputs,
                       br[0]->noutputs, n->nout);
    int cond = const_bool(mp_in(g, n, 0));
    for (int k = 0; k < 2; k++) {
        if (br[k]->ninputs)
            return mp_fail(err, "branch '%s' has %d inputs; If branches take none", br[k]->name, br[k]->ninputs);
        /* br[k] runs when cond == k. One that cannot run is inferred as far as it
         * goes: its errors are not the model's (e.g. the 3-D arm of a function given 2-D data). */
        bool dead = cond >= 0 && cond != k;
        mp_err ignored;
        if (body_run(br[k], NULL, dead ? &ignored : err) && !dead) return -1;
    }
    for (int i = 0; i < n->nout; i++) {
        ctl_type e = body_out(br[0], i, true), t = body_out(br[1], i, true), u;
        if (cond >= 0) { /* only one branch runs: its value passes through */
            out_put(g, n, i, cond ? &t : &e);
            continue;
        }
        mp_err inner;
        if (type_union(g, &t, &e, &u, &inner)) return mp_fail(err, "output %d of the two branches: %s", i, inner.msg);
        out_put(g, n, i, &u);
    }
    return 0;
}

/* ---- Loop ------------------------------------------------------------------- */

/* Nodes one pass over b evaluates, nested subgraphs included; -1 when b holds
 * a Loop, whose own unrolling would multiply the cost. */
static int64_t body_cost(const mp_graph *b)
{
    int64_t cost = b->nnodes;
    for (int32_t i = 0; i < b->nnodes; i++) {
        const mp_node *n = &b->nodes[i];
        if (!strcmp(n->op_type, "Loop") && !*n->domain) return -1;
        for (int32_t a = 0; a < n->nattrs; a++)
            for (int32_t k = 0; n->attrs[a].graphs && k < (n->attrs[a].type == MP_ATTR_GRAPH ? 1 : n->attrs[a].n);
                 k++) {
                int64_t c = body_cost(n->attrs[a].graphs[k]);
                if (c < 0) return -1;
                cost += c;
            }
    }
    return cost;
}

/* Runs the body iteration by iteration while trip count and condition are
 * known. in[] are the body's input types (iteration, cond, carried, with
 * contents); fills res[] (carried: the last values, scan outputs: the union
 * over iterations) and *trip. False when it cannot tell or runs out of budget. */
static bool loop_unroll(mp_graph *g, mp_graph *b, int64_t max_trip, int cond0, ctl_type *in, int ncarry, int nscan,
                        ctl_type *res, int64_t *trip)
{
    int64_t cost = body_cost(b), i = 0, budget = LOOP_UNROLL_NODES;
    if (max_trip < 0 || (cond0 < 0 && max_trip > 0) || cost < 0) return false;
    for (int k = 0; k < ncarry; k++) res[k] = in[2 + k];
    for (bool cond = cond0 != 0; cond && i < max_trip; i++) {
        if ((budget -= cost + 1) < 0) return false;
        mp_tensor *it = mp_tensor_new(g->arena, MP_INT64, 0, NULL);
        mp_tensor_set_i64(it, 0, i);
        in[0].konst = it;
        mp_err ignored; /* an iteration that fails here is left to the general pass to report */
        if (body_run(b, in, &ignored)) return false;
        int c = const_bool(mp_val(b, b->outputs[0]));
        if (c < 0) return false;
        cond = c;
        for (int k = 0; k < ncarry; k++) in[2 + k] = res[k] = body_out(b, 1 + k, true);
        for (int j = ncarry; j < ncarry + nscan; j++) {
            ctl_type s = body_out(b, 1 + j, false);
            if (i == 0)
                res[j] = s;
            else if (type_union(g, &res[j], &s, &res[j], &ignored))
                return false;
        }
    }
    *trip = i;
    return true;
}

int shape_Loop(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_graph *b = graph_attr(n, "body", err);
    if (!b) return -1;
    int ncarry = n->nin - 2;
    if (ncarry < 0) return mp_fail(err, "needs inputs M and cond (either may be empty), has %d inputs", n->nin);
    if (b->ninputs != ncarry + 2)
        return mp_fail(err, "body '%s' takes %d inputs; the node passes %d (iteration number, cond, %d carried)",
                       b->name, b->ninputs, ncarry + 2, ncarry);
    int nscan = b->noutputs - 1 - ncarry;
    if (nscan < 0 || n->nout > ncarry + nscan)
        return mp_fail(err, "body '%s' gives %d outputs: cond, %d carried values and scan outputs for %d node outputs",
                       b->name, b->noutputs, ncarry, n->nout);

    /* The body runs while cond holds, so it always sees cond true. */
    mp_value *M = mp_in(g, n, 0);
    int64_t max_trip = INT64_MAX, m; /* M omitted: no limit; -1: not known */
    if (M) max_trip = mp_const_ints(M, &m, 1) != 1 ? -1 : m < 0 ? 0 : m;
    int cond0 = mp_in(g, n, 1) ? const_bool(mp_in(g, n, 1)) : 1;
    mp_tensor *yes = mp_tensor_new(g->arena, MP_BOOL, 0, NULL);
    mp_tensor_set_i64(yes, 0, 1);

    ctl_type *in = mp_arena_alloc(g->arena, (size_t)(ncarry + 2) * sizeof *in);
    ctl_type *res = mp_arena_alloc(g->arena, (size_t)(ncarry + nscan + 1) * sizeof *res);
    in[0] = (ctl_type){.dtype = MP_INT64, .rank = 0, .seqlen = -1};
    in[1] = (ctl_type){.dtype = MP_BOOL, .rank = 0, .seqlen = -1, .konst = yes};
    for (int k = 0; k < ncarry; k++) in[2 + k] = type_of(mp_in(g, n, 2 + k), true);
    int64_t trip = -1;
    bool exact = loop_unroll(g, b, max_trip, cond0, in, ncarry, nscan, res, &trip);

    /* The general pass comes last so the body's values describe every iteration. */
    in[0].konst = NULL;
    for (int k = 0; k < ncarry; k++) {
        in[2 + k] = type_of(mp_in(g, n, 2 + k), false);
        if (in[2 + k].kind == MP_KIND_MAP || in[2 + k].kind == MP_KIND_SPARSE)
            return mp_fail(err, "carried value %d is a %s; not supported", k, kind_name(in[2 + k].kind));
    }
    if (body_settle(g, b, in, 2, 1, ncarry, err)) return -1;
    if (!exact) {
        bool always = const_bool(mp_val(b, b->outputs[0])) == 1;
        trip = max_trip == 0 || cond0 == 0 ? 0 : (max_trip != INT64_MAX && cond0 == 1 && always) ? max_trip : -1;
    }

    for (int k = 0; k < ncarry; k++) {
        /* after at least one iteration a carried output is the body's last output */
        ctl_type t = exact ? res[k] : trip > 0 ? body_out(b, 1 + k, false) : in[2 + k];
        out_put(g, n, k, &t);
    }
    for (int j = ncarry; j < ncarry + nscan && j < n->nout; j++) {
        ctl_type e = exact && trip > 0 ? res[j] : body_out(b, 1 + j, false), t;
        if (e.kind != MP_KIND_TENSOR)
            return mp_fail(err, "scan output %d of the body is a %s; Loop stacks tensors only", j - ncarry,
                           kind_name(e.kind));
        if (type_insert_dim(g, &e, 0, trip >= 0 ? mp_dim_of(trip) : MP_DIM_UNKNOWN, &t, err)) return -1;
        out_put(g, n, j, &t);
    }
    return 0;
}

/* ---- Scan ------------------------------------------------------------------- */

/* Merges a sequence-length (or batch) dim seen on an input into *acc. */
static int dim_unify(const mp_graph *g, mp_dim *acc, mp_dim d, const char *what, const char *name, mp_err *err)
{
    char a[32], b[32];
    if (mp_dim_known(*acc) && mp_dim_known(d) && acc->v != d.v)
        return mp_fail(err, "scan input '%s' has %s %s, another has %s", name, what, mp_dim_str(g, d, a),
                       mp_dim_str(g, *acc, b));
    if (!mp_dim_known(*acc) && (mp_dim_known(d) || acc->sym < 0)) *acc = d;
    return 0;
}

/* Scan-8 has a leading optional sequence_lens input and a batch axis 0 on every
 * input and output (the scan axis is 1); Scan-9+ has neither, and per-input axes. */
int shape_Scan(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_graph *b = graph_attr(n, "body", err);
    if (!b) return -1;
    int64_t ver = mp_graph_opset(g, "");
    bool v8 = ver > 0 && ver < 9;
    int first = v8 ? 1 : 0;
    int64_t nsin = mp_attr_int(n, "num_scan_inputs", -1);
    if (nsin < 1 || nsin > n->nin - first)
        return mp_fail(err, "num_scan_inputs %lld does not fit the %d inputs", (long long)nsin, n->nin);
    int nstate = n->nin - first - (int)nsin;
    if (b->ninputs != nstate + nsin)
        return mp_fail(err, "body '%s' takes %d inputs; the node passes %d states and %lld scan inputs", b->name,
                       b->ninputs, nstate, (long long)nsin);
    int nsout = b->noutputs - nstate;
    if (nsout < 0 || n->nout > b->noutputs)
        return mp_fail(err, "body '%s' gives %d outputs for %d states and %d node outputs", b->name, b->noutputs,
                       nstate, n->nout);
    const int64_t *in_axes = NULL, *out_axes = NULL;
    int nia = mp_attr_ints(n, "scan_input_axes", &in_axes), noa = mp_attr_ints(n, "scan_output_axes", &out_axes);
    if ((nia >= 0 && nia != nsin) || (noa >= 0 && noa != nsout))
        return mp_fail(err, "scan_input_axes/scan_output_axes give %d/%d axes for %lld/%d scan inputs/outputs", nia,
                       noa, (long long)nsin, nsout);

    mp_dim batch = MP_DIM_UNKNOWN, seq = MP_DIM_UNKNOWN;
    ctl_type *in = mp_arena_alloc(g->arena, (size_t)(nstate + nsin + 1) * sizeof *in);
    for (int i = 0; i < nstate + nsin; i++) {
        const mp_value *x = mp_in(g, n, first + i);
        if (!x) return mp_fail(err, "missing input %d", first + i);
        ctl_type t = type_of(x, false);
        if (t.kind != MP_KIND_TENSOR)
            return mp_fail(err, "input '%s' is a %s; Scan takes tensors", x->name, kind_name(t.kind));
        bool scanned = i >= nstate;
        if (v8 && t.rank >= 0 && t.rank < 1 + scanned)
            return mp_fail(err, "input '%s' has rank %d; Scan-8 needs a batch axis%s", x->name, t.rank,
                           scanned ? " and a sequence axis" : "");
        if (v8) {
            if (t.rank >= 0 && dim_unify(g, &batch, t.dims[0], "batch size", x->name, err)) return -1;
            if (scanned && t.rank >= 0 && dim_unify(g, &seq, t.dims[1], "sequence length", x->name, err)) return -1;
            t = type_drop_dim(g, &t, 0);
            if (scanned) t = type_drop_dim(g, &t, 0);
        } else if (scanned && t.rank >= 0) {
            int64_t axis;
            if (mp_norm_axis(in_axes ? in_axes[i - nstate] : 0, t.rank, false, &axis, err)) return -1;
            if (dim_unify(g, &seq, t.dims[axis], "sequence length", x->name, err)) return -1;
            t = type_drop_dim(g, &t, (int)axis);
        }
        in[i] = t;
    }
    if (body_settle(g, b, in, 0, 0, nstate, err)) return -1;

    for (int k = 0; k < n->nout; k++) {
        ctl_type t = k < nstate && !(seq.v > 0) ? in[k] : body_out(b, k, false);
        if (t.kind != MP_KIND_TENSOR)
            return mp_fail(err, "output %d of the body is a %s; Scan gives tensors", k, kind_name(t.kind));
        if (k >= nstate) {
            int64_t axis = 0;
            if (!v8 && out_axes && t.rank >= 0 && mp_norm_axis(out_axes[k - nstate], t.rank + 1, false, &axis, err))
                return -1;
            if (type_insert_dim(g, &t, (int)axis, seq, &t, err)) return -1;
        }
        if (v8 && type_insert_dim(g, &t, 0, batch, &t, err)) return -1;
        out_put(g, n, k, &t);
    }
    return 0;
}

/* ---- SequenceMap -------------------------------------------------------------- */

int shape_SequenceMap(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_graph *b = graph_attr(n, "body", err);
    if (!b) return -1;
    if (n->nin < 1 || b->ninputs != n->nin || n->nout > b->noutputs)
        return mp_fail(err, "body '%s' takes %d inputs and gives %d outputs; the node has %d and %d", b->name,
                       b->ninputs, b->noutputs, n->nin, n->nout);
    int64_t len = -1;
    ctl_type *in = mp_arena_alloc(g->arena, (size_t)n->nin * sizeof *in);
    for (int i = 0; i < n->nin; i++) {
        const mp_value *x = mp_in(g, n, i);
        ctl_type t = type_of(x, false);
        if (i == 0 && t.kind != MP_KIND_SEQUENCE && !untyped(&t))
            return mp_fail(err, "input_sequence is a %s, not a sequence", kind_name(t.kind));
        if (t.kind == MP_KIND_SEQUENCE) { /* the body sees one element */
            if (t.seqlen >= 0 && len >= 0 && t.seqlen != len)
                return mp_fail(err, "input sequences have %lld and %lld elements", (long long)len, (long long)t.seqlen);
            if (t.seqlen >= 0) len = t.seqlen;
            t.kind = MP_KIND_TENSOR;
            t.seqlen = -1;
            t.elems = NULL;
        }
        in[i] = t;
    }
    if (body_run(b, in, err)) return -1;
    for (int k = 0; k < n->nout; k++) {
        ctl_type t = body_out(b, k, false);
        if (t.kind != MP_KIND_TENSOR)
            return mp_fail(err, "output %d of the body is a %s; SequenceMap collects tensors", k, kind_name(t.kind));
        t.kind = MP_KIND_SEQUENCE;
        t.seqlen = len;
        out_put(g, n, k, &t);
    }
    return 0;
}

/* ---- sequences ----------------------------------------------------------------- */

/* Input i as a sequence; fails when it is missing or clearly something else. */
static int seq_in(mp_graph *g, const mp_node *n, int i, ctl_type *t, mp_err *err)
{
    const mp_value *s = mp_in(g, n, i);
    if (!s) return mp_fail(err, "missing input %d (a sequence)", i);
    *t = type_of(s, false);
    if (untyped(t)) *t = type_unknown(MP_KIND_SEQUENCE);
    if (t->kind != MP_KIND_SEQUENCE)
        return mp_fail(err, "input '%s' is a %s, not a sequence", s->name, kind_name(t->kind));
    if (t->elems && t->seqlen < 0) t->elems = NULL;
    return 0;
}

/* Input i as a tensor; an omitted input gives an unknown tensor. */
static int tensor_in(mp_graph *g, const mp_node *n, int i, ctl_type *t, mp_err *err)
{
    const mp_value *x = mp_in(g, n, i);
    *t = type_of(x, false);
    if (t->kind != MP_KIND_TENSOR) return mp_fail(err, "input '%s' is a %s, not a tensor", x->name, kind_name(t->kind));
    return 0;
}

/* Position input i of a sequence of len elements (-1: unknown), normalized
 * into *p; dflt when omitted. Returns 1 when known, 0 when not, -1 when out
 * of range (insert allows len itself). */
static int seq_pos(mp_graph *g, const mp_node *n, int i, int64_t len, int64_t dflt, bool insert, int64_t *p,
                   mp_err *err)
{
    const mp_value *pos = mp_in(g, n, i);
    if (!pos) {
        *p = dflt;
        return len >= 0;
    }
    if (pos->rank > 0 && !(pos->rank == 1 && pos->dims[0].v == 1))
        return mp_fail(err, "position must be a scalar, has rank %d", pos->rank);
    if (len < 0 || mp_const_ints(pos, p, 1) != 1) return 0;
    int64_t q = *p < 0 ? *p + len : *p;
    if (q < 0 || q > len - (insert ? 0 : 1)) {
        /* reading an empty sequence is left to run time (it may sit in a branch that never runs) */
        if (len == 0 && !insert) return 0;
        return mp_fail(err, "position %lld is out of range for a sequence of %lld elements", (long long)*p,
                       (long long)len);
    }
    *p = q;
    return 1;
}

int shape_SequenceEmpty(mp_graph *g, mp_node *n, mp_err *err)
{
    int64_t dt = mp_attr_int(n, "dtype", MP_FLOAT);
    if (dt <= 0 || dt >= MP_DTYPE_COUNT || !mp_dtype_valid((int)dt))
        return mp_fail(err, "dtype %lld is not a tensor element type", (long long)dt);
    ctl_type t = type_unknown(MP_KIND_SEQUENCE);
    t.dtype = (mp_dtype)dt;
    t.seqlen = 0;
    t.elems = elems_new(g, 0);
    out_put(g, n, 0, &t);
    return 0;
}

int shape_SequenceConstruct(mp_graph *g, mp_node *n, mp_err *err)
{
    if (n->nin < 1) return mp_fail(err, "needs at least one input");
    ctl_type t = type_unknown(MP_KIND_SEQUENCE), x;
    mp_type *e = n->nin <= SEQ_TRACK_MAX ? elems_new(g, n->nin) : NULL;
    for (int i = 0; i < n->nin; i++) {
        if (tensor_in(g, n, i, &x, err)) return -1;
        if (!mp_in(g, n, i)) return mp_fail(err, "input %d is empty", i);
        if (i == 0) {
            t.dtype = x.dtype;
            t.rank = x.rank;
            t.dims = x.dims;
        } else if (tensor_union(g, &t, &x, &t, err)) {
            return -1;
        }
        if (e) e[i] = elem_of(&x);
    }
    t.seqlen = n->nin;
    t.elems = e;
    out_put(g, n, 0, &t);
    return 0;
}

int shape_SequenceInsert(mp_graph *g, mp_node *n, mp_err *err)
{
    ctl_type s, x;
    int64_t p;
    if (seq_in(g, n, 0, &s, err) || tensor_in(g, n, 1, &x, err)) return -1;
    if (!mp_in(g, n, 1)) return mp_fail(err, "missing input tensor");
    int known = seq_pos(g, n, 2, s.seqlen, s.seqlen, true, &p, err);
    if (known < 0) return -1;
    if (s.seqlen == 0) { /* the first element sets the shape */
        if (s.dtype != MP_UNDEFINED && x.dtype != MP_UNDEFINED && s.dtype != x.dtype)
            return mp_fail(err, "inserts %s into a sequence of %s", mp_dtype_name(x.dtype), mp_dtype_name(s.dtype));
        s.rank = x.rank;
        s.dims = x.dims;
        if (s.dtype == MP_UNDEFINED) s.dtype = x.dtype;
    } else if (tensor_union(g, &s, &x, &s, err)) {
        return -1;
    }
    mp_type *e = NULL;
    if (s.elems && known && s.seqlen < SEQ_TRACK_MAX) {
        e = elems_new(g, s.seqlen + 1);
        memcpy(e, s.elems, (size_t)p * sizeof *e);
        e[p] = elem_of(&x);
        memcpy(e + p + 1, s.elems + p, (size_t)(s.seqlen - p) * sizeof *e);
    }
    s.elems = e;
    s.seqlen = s.seqlen >= 0 ? s.seqlen + 1 : -1;
    out_put(g, n, 0, &s);
    return 0;
}

int shape_SequenceAt(mp_graph *g, mp_node *n, mp_err *err)
{
    ctl_type s;
    int64_t p;
    if (seq_in(g, n, 0, &s, err)) return -1;
    if (!mp_in(g, n, 1)) return mp_fail(err, "missing input position");
    int known = seq_pos(g, n, 1, s.seqlen, 0, false, &p, err);
    if (known < 0) return -1;
    ctl_type t = known && s.elems ? elem_type(&s.elems[p]) : s;
    t.kind = MP_KIND_TENSOR;
    t.seqlen = -1;
    t.elems = NULL;
    out_put(g, n, 0, &t);
    return 0;
}

int shape_SequenceErase(mp_graph *g, mp_node *n, mp_err *err)
{
    ctl_type s;
    int64_t p;
    if (seq_in(g, n, 0, &s, err)) return -1;
    int known = seq_pos(g, n, 1, s.seqlen, s.seqlen - 1, false, &p, err);
    if (known < 0) return -1;
    if (s.seqlen == 0) known = 0;
    if (s.elems && known) { /* the remaining elements may agree on more */
        mp_type *e = elems_new(g, s.seqlen - 1);
        memcpy(e, s.elems, (size_t)p * sizeof *e);
        memcpy(e + p, s.elems + p + 1, (size_t)(s.seqlen - 1 - p) * sizeof *e);
        s.elems = e;
        if (s.seqlen > 1 && elems_merge(g, e, s.seqlen - 1, &s, err)) return -1;
    } else {
        s.elems = NULL;
    }
    if (s.seqlen > 0) s.seqlen--;
    out_put(g, n, 0, &s);
    return 0;
}

int shape_SequenceLength(mp_graph *g, mp_node *n, mp_err *err)
{
    ctl_type s = {.seqlen = -1}; /* set by seq_in; initialized for the optimizer's sake */
    if (seq_in(g, n, 0, &s, err)) return -1;
    mp_dim len = s.seqlen >= 0 ? mp_dim_of(s.seqlen) : MP_DIM_UNKNOWN;
    return mp_set_out_dims(g, n, 0, &len, 1, true);
}

/* The concatenation axis of a sequence: the sum of the elements' dims. */
static int concat_dim(const ctl_type *s, int axis, mp_dim *out, mp_err *err)
{
    int64_t total = 0;
    *out = MP_DIM_UNKNOWN;
    if (s->seqlen == 1) {
        *out = s->elems ? s->elems[0].dims[axis] : s->dims[axis];
    } else if (s->seqlen >= 0 && !s->elems) { /* all elements agree on the dim, or it is unknown */
        if (s->dims[axis].v < 0) return 0;
        if (!mp_mul_ok(s->dims[axis].v, s->seqlen, &total)) return mp_fail(err, "concatenated dim overflows int64");
        *out = mp_dim_of(total);
    } else if (s->seqlen >= 0) {
        for (int64_t i = 0; i < s->seqlen; i++) {
            int64_t d = s->elems[i].dims[axis].v;
            if (d < 0) return 0;
            if (!mp_add_ok(total, d, &total)) return mp_fail(err, "concatenated dim overflows int64");
        }
        *out = mp_dim_of(total);
    }
    return 0;
}

int shape_ConcatFromSequence(mp_graph *g, mp_node *n, mp_err *err)
{
    ctl_type s;
    if (seq_in(g, n, 0, &s, err)) return -1;
    const mp_attr *axis_attr = mp_node_attr(n, "axis");
    if (!axis_attr || axis_attr->type != MP_ATTR_INT) return mp_fail(err, "missing attribute 'axis'");
    int64_t new_axis = mp_attr_int(n, "new_axis", 0), axis;
    if (new_axis != 0 && new_axis != 1) return mp_fail(err, "new_axis must be 0 or 1, is %lld", (long long)new_axis);
    ctl_type t = type_unknown(MP_KIND_TENSOR);
    t.dtype = s.dtype;
    /* element ranks must agree to concatenate; the merged shape has rank -1 when they do not */
    for (int64_t i = 1; s.elems && i < s.seqlen; i++)
        if (s.elems[i].rank != s.elems[0].rank)
            return mp_fail(err, "elements have ranks %d and %d", s.elems[0].rank, s.elems[i].rank);
    if (s.rank < 0) {
        out_put(g, n, 0, &t);
        return 0;
    }
    if (mp_norm_axis(axis_attr->i, s.rank + (int)new_axis, false, &axis, err)) return -1;
    if (new_axis) { /* stacked: the new axis counts the elements */
        if (type_insert_dim(g, &s, (int)axis, s.seqlen >= 0 ? mp_dim_of(s.seqlen) : MP_DIM_UNKNOWN, &t, err)) return -1;
        t.kind = MP_KIND_TENSOR;
        t.seqlen = -1;
        out_put(g, n, 0, &t);
        return 0;
    }
    if (s.rank == 0) return mp_fail(err, "cannot concatenate scalars without new_axis");
    mp_dim *dims = mp_arena_dup(g->arena, s.dims, (size_t)s.rank * sizeof *dims);
    if (concat_dim(&s, (int)axis, &dims[axis], err)) return -1;
    t.rank = s.rank;
    t.dims = dims;
    out_put(g, n, 0, &t);
    return 0;
}

int shape_SplitToSequence(mp_graph *g, mp_node *n, mp_err *err)
{
    ctl_type x;
    if (tensor_in(g, n, 0, &x, err)) return -1;
    if (!mp_in(g, n, 0)) return mp_fail(err, "missing input");
    const mp_value *split = mp_in(g, n, 1);
    ctl_type s = type_unknown(MP_KIND_SEQUENCE);
    s.dtype = x.dtype;
    if (split && split->rank > 1) return mp_fail(err, "split must be a scalar or 1-D, has rank %d", split->rank);
    if (split && split->rank == 1 && split->dims[0].v >= 0) s.seqlen = split->dims[0].v;
    if (x.rank < 0) {
        out_put(g, n, 0, &s);
        return 0;
    }
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", 0), x.rank, false, &axis, err)) return -1;
    int64_t D = x.dims[axis].v, k = 1;
    bool drop = !split && !mp_attr_int(n, "keepdims", 1);
    const mp_tensor *lens = split && split->konst && split->rank == 1 ? split->konst : NULL;
    if (split && split->konst && split->rank == 0) { /* pieces of k, the last one may be shorter */
        k = mp_tensor_get_i64(split->konst, 0);
        if (k <= 0) return mp_fail(err, "split must be positive, is %lld", (long long)k);
    }
    if (lens) { /* the given lengths */
        int64_t sum = 0;
        for (int64_t i = 0; i < lens->numel; i++) {
            int64_t v = mp_tensor_get_i64(lens, i);
            if (v < 0 || !mp_add_ok(sum, v, &sum)) return mp_fail(err, "split lengths must be non-negative");
        }
        if (D >= 0 && sum != D)
            return mp_fail(err, "split lengths sum to %lld, the axis has %lld", (long long)sum, (long long)D);
        s.seqlen = lens->numel;
    } else if (!split || split->konst) {
        s.seqlen = D >= 0 ? D / k + (D % k != 0) : -1;
    }
    s.rank = x.rank;
    s.dims = x.dims;
    /* each piece's length along the axis, when the split is known */
    if (s.seqlen >= 0 && s.seqlen <= SEQ_TRACK_MAX && (lens || (!split || split->konst))) {
        mp_type *e = elems_new(g, s.seqlen);
        for (int64_t i = 0; i < s.seqlen; i++) {
            int64_t len = lens ? mp_tensor_get_i64(lens, i) : i + 1 < s.seqlen ? k : D - k * i;
            mp_dim *d = mp_arena_dup(g->arena, x.dims, (size_t)x.rank * sizeof *d);
            d[axis] = mp_dim_of(len);
            ctl_type piece = elem_type(&(mp_type){MP_KIND_TENSOR, MP_KIND_TENSOR, x.dtype, x.rank, d});
            if (drop) piece = type_drop_dim(g, &piece, (int)axis);
            e[i] = elem_of(&piece);
        }
        s.elems = e;
        if (s.seqlen && elems_merge(g, e, s.seqlen, &s, err)) return -1;
        if (!s.seqlen) s.rank = -1;
    } else { /* the pieces' lengths are not known, except unit pieces' */
        mp_dim *d = mp_arena_dup(g->arena, x.dims, (size_t)x.rank * sizeof *d);
        d[axis] = split ? MP_DIM_UNKNOWN : mp_dim_of(1);
        s.dims = d;
        if (drop) s = type_drop_dim(g, &s, (int)axis);
    }
    out_put(g, n, 0, &s);
    return 0;
}

/* ---- optionals ----------------------------------------------------------------- */

int shape_Optional(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    ctl_type t = type_unknown(MP_KIND_OPTIONAL);
    if (x) {
        t = type_of(x, false);
        if (t.kind != MP_KIND_TENSOR && t.kind != MP_KIND_SEQUENCE)
            return mp_fail(err, "input '%s' is a %s; an optional holds a tensor or a sequence", x->name,
                           kind_name(t.kind));
        t.elem_kind = t.kind;
        t.kind = MP_KIND_OPTIONAL;
    } else {
        const mp_attr *a = mp_node_attr(n, "type");
        if (!a || a->type != MP_ATTR_TYPE_PROTO) return mp_fail(err, "an empty Optional needs the attribute 'type'");
        if (a->types) { /* mp_type: the held kind, and its element tensors */
            t.elem_kind = a->types[0].kind;
            t.dtype = a->types[0].dtype;
            t.rank = a->types[0].rank;
            t.dims = a->types[0].dims;
        }
    }
    out_put(g, n, 0, &t);
    return 0;
}

int shape_OptionalGetElement(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    ctl_type t = type_of(x, x->kind != MP_KIND_OPTIONAL); /* a plain tensor or sequence passes through */
    if (t.kind == MP_KIND_OPTIONAL) {
        t.kind = t.elem_kind;
        t.elem_kind = MP_KIND_TENSOR;
        if (t.kind != MP_KIND_SEQUENCE) t.seqlen = -1;
    }
    out_put(g, n, 0, &t);
    return 0;
}

int shape_OptionalHasElement(mp_graph *g, mp_node *n, mp_err *err)
{
    (void)err;
    const mp_value *x = mp_in(g, n, 0);
    ctl_type t = type_of(x, false);
    int has = !x ? 0 : (t.kind == MP_KIND_OPTIONAL || untyped(&t)) ? -1 : 1;
    if (has < 0) return mp_set_out(g, n, 0, MP_BOOL, 0, NULL);
    mp_tensor *k = mp_tensor_new(g->arena, MP_BOOL, 0, NULL);
    mp_tensor_set_i64(k, 0, has);
    return mp_set_out_const(g, n, 0, k);
}
