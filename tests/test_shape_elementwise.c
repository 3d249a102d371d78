/* test_shape_elementwise.c - shape rules and folding of the elementwise,
 * logic, reduction and softmax ops, on tiny graphs built with the IR API. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h"
#include "frontend/shape.h"

/* ---- graph building helpers --------------------------------------------- */

static mp_graph *g;
static mp_err err;

static void setup(void)
{
    g = mp_graph_new(NULL);
    err.msg[0] = 0;
}

static void teardown(void) { mp_graph_free(g); }

static void opset(int64_t v)
{
    g->opsets = mp_arena_alloc(g->arena, sizeof *g->opsets);
    g->opsets[0] = (mp_opset){"", v};
    g->nopsets = 1;
}

/* A graph input of that type; dims given as ints, -1 for the symbol "batch". */
static int32_t input(const char *name, mp_dtype t, int rank, const int64_t *d)
{
    int32_t id = mp_graph_add_value(g, name);
    mp_dim dims[MP_MAX_RANK];
    for (int i = 0; i < rank; i++) dims[i] = d[i] < 0 ? mp_sym_dim(g, "batch") : mp_dim_of(d[i]);
    mp_value_set(g, id, t, rank, rank >= 0 ? dims : NULL);
    g->values[id].flags |= MP_VAL_INPUT;
    return id;
}

/* A known tensor (an initializer with contents) of doubles converted to t. */
static int32_t konst(const char *name, mp_dtype t, int rank, const int64_t *dims, const double *vals)
{
    mp_tensor *k = mp_tensor_new(g->arena, t, rank, dims);
    for (int64_t i = 0; i < k->numel; i++) mp_tensor_set_f64(k, i, vals[i]);
    int32_t id = mp_graph_add_value(g, name);
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    mp_value_set(g, id, t, rank, d);
    g->values[id].konst = k;
    g->values[id].flags |= MP_VAL_INITIALIZER;
    return id;
}

static int32_t konst_i64(const char *name, int rank, const int64_t *dims, const int64_t *vals)
{
    mp_tensor *k = mp_tensor_new(g->arena, MP_INT64, rank, dims);
    memcpy(k->data, vals, (size_t)k->numel * sizeof *vals);
    int32_t id = konst(name, MP_INT64, rank, dims, (double[64]){0});
    g->values[id].konst = k;
    return id;
}

static int32_t konst_str(const char *name, int rank, const int64_t *dims, const char *const *vals)
{
    mp_tensor *k = mp_tensor_new(g->arena, MP_STRING, rank, dims);
    memcpy(k->data, vals, (size_t)k->numel * sizeof *vals);
    int32_t id = mp_graph_add_value(g, name);
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    mp_value_set(g, id, MP_STRING, rank, d);
    g->values[id].konst = k;
    return id;
}

/* A 1-D int64 shape vector with symbolic entries (as Shape of x[batch, 3] gives). */
static int32_t shape_vec(const char *name, int count, const mp_dim *entries)
{
    int32_t id = mp_graph_add_value(g, name);
    mp_dim len = mp_dim_of(count);
    mp_value_set(g, id, MP_INT64, 1, &len);
    g->values[id].symdata = mp_arena_dup(g->arena, entries, (size_t)count * sizeof *entries);
    g->values[id].nsymdata = count;
    return id;
}

/* Adds node op(ins) -> one new output named out; returns the output id. */
static int32_t node(const char *op, const char *out, int nin, const int32_t *ins)
{
    int32_t y = mp_graph_add_value(g, out);
    mp_graph_add_node(g, out, op, "", nin, ins, 1, &y);
    return y;
}

static mp_attr *add_attr(const char *name, mp_attr_type type)
{
    mp_node *n = &g->nodes[g->nnodes - 1];
    mp_attr *a = mp_arena_alloc(g->arena, (size_t)(n->nattrs + 1) * sizeof *a);
    if (n->nattrs) memcpy(a, n->attrs, (size_t)n->nattrs * sizeof *a);
    n->attrs = a;
    a = &n->attrs[n->nattrs++];
    a->name = name;
    a->type = type;
    return a;
}

static void attr_int(const char *name, int64_t v) { add_attr(name, MP_ATTR_INT)->i = v; }
static void attr_float(const char *name, float v) { add_attr(name, MP_ATTR_FLOAT)->f = v; }
static void attr_str(const char *name, const char *v) { add_attr(name, MP_ATTR_STRING)->s = v; }
static void attr_ints(const char *name, int n, const int64_t *v)
{
    mp_attr *a = add_attr(name, MP_ATTR_INTS);
    a->n = n;
    a->ints = mp_arena_dup(g->arena, v, (size_t)n * sizeof *v);
}
static void attr_strings(const char *name, int n, const char **v)
{
    mp_attr *a = add_attr(name, MP_ATTR_STRINGS);
    a->n = n;
    a->strings = v;
}

static int infer(void)
{
    ck_assert_int_eq(mp_graph_link(g, &err), 0);
    return mp_infer(g, &err);
}

static void infer_ok(void)
{
    int rc = infer();
    ck_assert_msg(rc == 0, "inference failed: %s", err.msg);
}

static const char *type_of(int32_t id)
{
    static char buf[256];
    return mp_value_type_str(g, &g->values[id], buf, sizeof buf);
}

static const mp_tensor *konst_of(int32_t id)
{
    ck_assert_msg(g->values[id].konst != NULL, "'%s' was not folded", g->values[id].name);
    return g->values[id].konst;
}

/* Checks that the value folded to exactly these elements. */
static void expect_vals(int32_t id, int n, const double *want)
{
    const mp_tensor *t = konst_of(id);
    ck_assert_int_eq(t->numel, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(mp_tensor_get_f64(t, i) == want[i] || (isnan(want[i]) && isnan(mp_tensor_get_f64(t, i))),
                      "'%s'[%d] = %g, want %g", g->values[id].name, i, mp_tensor_get_f64(t, i), want[i]);
}

/* ---- shapes and dtypes ----------------------------------------------------- */

START_TEST(broadcast_keeps_symbols)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 1, 4});
    int32_t y = input("y", MP_FLOAT, 2, (int64_t[]){3, 1});
    int32_t z = node("Add", "z", 2, (int32_t[]){x, y});
    int32_t s = input("s", MP_FLOAT, 0, NULL);
    int32_t w = node("Mul", "w", 2, (int32_t[]){z, s});
    infer_ok();
    ck_assert_str_eq(type_of(z), "float32[batch,3,4]");
    ck_assert_str_eq(type_of(w), "float32[batch,3,4]");
    ck_assert_ptr_null(g->values[z].konst);
}
END_TEST

START_TEST(broadcast_error_names_dims)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){2, 3});
    int32_t y = input("y", MP_FLOAT, 1, (int64_t[]){4});
    node("Sub", "z", 2, (int32_t[]){x, y});
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "dims 3 and 4"), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "'x' float32[2,3]") && strstr(err.msg, "'y' float32[4]"), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "node 'z' (Sub)"), "%s", err.msg);
}
END_TEST

START_TEST(mixed_dtypes_are_rejected)
{
    int32_t x = input("x", MP_FLOAT, 1, (int64_t[]){2});
    int32_t y = input("y", MP_INT64, 1, (int64_t[]){2});
    node("Add", "z", 2, (int32_t[]){x, y});
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "same dtype"), "%s", err.msg);
}
END_TEST

START_TEST(float_only_op_rejects_ints)
{
    int32_t x = input("x", MP_INT64, 1, (int64_t[]){2});
    node("Sin", "y", 1, &x);
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "int64") && strstr(err.msg, "Sin"), "%s", err.msg);
}
END_TEST

START_TEST(output_dtypes)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){-1, 5});
    int32_t i = input("i", MP_INT32, 1, (int64_t[]){5});
    int32_t lt = node("Less", "lt", 2, (int32_t[]){x, x});
    int32_t nan = node("IsNaN", "nan", 1, &x);
    int32_t c = node("Cast", "c", 1, &x);
    attr_int("to", MP_FLOAT16);
    int32_t cl = node("CastLike", "cl", 2, (int32_t[]){x, i});
    int32_t am = node("ArgMax", "am", 1, &x);
    attr_int("axis", -1);
    attr_int("keepdims", 0);
    int32_t pw = node("Pow", "pw", 2, (int32_t[]){i, x});
    int32_t wh = node("Where", "wh", 3, (int32_t[]){lt, x, x});
    infer_ok();
    ck_assert_str_eq(type_of(lt), "bool[batch,5]");
    ck_assert_str_eq(type_of(nan), "bool[batch,5]");
    ck_assert_str_eq(type_of(c), "float16[batch,5]");
    ck_assert_str_eq(type_of(cl), "int32[batch,5]");
    ck_assert_str_eq(type_of(am), "int64[batch]");
    ck_assert_str_eq(type_of(pw), "int32[batch,5]");
    ck_assert_str_eq(type_of(wh), "float32[batch,5]");
}
END_TEST

START_TEST(unknown_rank_propagates)
{
    int32_t x = input("x", MP_FLOAT, -1, NULL);
    int32_t y = input("y", MP_FLOAT, 1, (int64_t[]){3});
    int32_t z = node("Add", "z", 2, (int32_t[]){x, y});
    int32_t r = node("ReduceSum", "r", 1, &z);
    infer_ok();
    ck_assert_int_eq(g->values[z].rank, -1);
    ck_assert_int_eq(g->values[z].dtype, MP_FLOAT);
    ck_assert_int_eq(g->values[r].rank, -1);
}
END_TEST

/* ---- folding ------------------------------------------------------------------ */

START_TEST(integer_arithmetic_folds_like_onnx)
{
    int32_t a = konst("a", MP_INT64, 1, (int64_t[]){4}, (double[]){7, -7, 7, -7});
    int32_t b = konst("b", MP_INT64, 1, (int64_t[]){4}, (double[]){2, 2, -3, 3});
    int32_t div = node("Div", "div", 2, (int32_t[]){a, b});
    int32_t mod = node("Mod", "mod", 2, (int32_t[]){a, b});
    int32_t fmod = node("Mod", "fmod", 2, (int32_t[]){a, b});
    attr_int("fmod", 1);
    int32_t pw = node("Pow", "pw", 2, (int32_t[]){b, b});
    int32_t big = konst("big", MP_INT32, 0, NULL, (double[]){2147483647});
    int32_t wrap = node("Add", "wrap", 2, (int32_t[]){big, big});
    int32_t zero = konst("zero", MP_INT64, 0, NULL, (double[]){0});
    int32_t dz = node("Div", "dz", 2, (int32_t[]){a, zero});
    infer_ok();
    expect_vals(div, 4, (double[]){3, -3, -2, -2});
    expect_vals(mod, 4, (double[]){1, 1, -2, 2});
    expect_vals(fmod, 4, (double[]){1, -1, 1, -1});
    expect_vals(pw, 4, (double[]){4, 4, 0, 27});
    expect_vals(wrap, 1, (double[]){-2});
    ck_assert_ptr_null(g->values[dz].konst); /* division by zero: left unknown, shape still set */
    ck_assert_str_eq(type_of(dz), "int64[4]");
}
END_TEST

START_TEST(float_and_half_fold)
{
    int32_t h = konst("h", MP_FLOAT16, 1, (int64_t[]){3}, (double[]){1.5, -2, 0.25});
    int32_t s = node("Add", "s", 2, (int32_t[]){h, h});
    int32_t f = konst("f", MP_FLOAT, 1, (int64_t[]){4}, (double[]){4, 2.5, -0.5, 0});
    int32_t sq = node("Sqrt", "sq", 1, &f);
    int32_t rd = node("Round", "rd", 1, &f);
    int32_t lr = node("LeakyRelu", "lr", 1, &f);
    attr_float("alpha", 0.5f);
    int32_t ci = node("Cast", "ci", 1, &f);
    attr_int("to", MP_INT32);
    int32_t cb = node("Cast", "cb", 1, &f);
    attr_int("to", MP_BOOL);
    infer_ok();
    ck_assert_int_eq(konst_of(s)->dtype, MP_FLOAT16);
    expect_vals(s, 3, (double[]){3, -4, 0.5});
    expect_vals(sq, 4, (double[]){2, (float)sqrt(2.5), NAN, 0});
    expect_vals(rd, 4, (double[]){4, 2, -0.0, 0}); /* half to even */
    expect_vals(lr, 4, (double[]){4, 2.5, -0.25, 0});
    expect_vals(ci, 4, (double[]){4, 2, 0, 0});
    expect_vals(cb, 4, (double[]){1, 1, 1, 0}); /* nonzero is true, even -0.5 */
}
END_TEST

START_TEST(logic_comparison_where_fold)
{
    int32_t a = konst("a", MP_INT64, 2, (int64_t[]){2, 2}, (double[]){1, 5, 3, 4});
    int32_t b = konst("b", MP_INT64, 1, (int64_t[]){2}, (double[]){3, 4});
    int32_t eq = node("Equal", "eq", 2, (int32_t[]){a, b});
    int32_t ge = node("GreaterOrEqual", "ge", 2, (int32_t[]){a, b});
    int32_t nt = node("Not", "nt", 1, &eq);
    int32_t an = node("And", "an", 2, (int32_t[]){nt, ge});
    int32_t wh = node("Where", "wh", 3, (int32_t[]){an, a, b});
    infer_ok();
    ck_assert_int_eq(konst_of(eq)->dtype, MP_BOOL);
    expect_vals(eq, 4, (double[]){0, 0, 1, 1});
    expect_vals(ge, 4, (double[]){0, 1, 1, 1});
    expect_vals(an, 4, (double[]){0, 1, 0, 0});
    expect_vals(wh, 4, (double[]){3, 5, 3, 4});
}
END_TEST

START_TEST(unsigned_64_compares_unsigned)
{
    int32_t id = konst("a", MP_UINT64, 1, (int64_t[]){1}, (double[]){0});
    ((uint64_t *)g->values[id].konst->data)[0] = UINT64_MAX;
    int32_t one = konst("one", MP_UINT64, 1, (int64_t[]){1}, (double[]){1});
    int32_t gt = node("Greater", "gt", 2, (int32_t[]){id, one});
    int32_t dv = node("Div", "dv", 2, (int32_t[]){id, one});
    infer_ok();
    expect_vals(gt, 1, (double[]){1});
    ck_assert(((uint64_t *)konst_of(dv)->data)[0] == UINT64_MAX);
}
END_TEST

START_TEST(variadic_fold_broadcasts)
{
    int32_t a = konst("a", MP_FLOAT, 1, (int64_t[]){3}, (double[]){1, 5, 3});
    int32_t b = konst("b", MP_FLOAT, 0, NULL, (double[]){2});
    int32_t c = konst("c", MP_FLOAT, 2, (int64_t[]){2, 1}, (double[]){0, 6});
    int32_t mx = node("Max", "mx", 3, (int32_t[]){a, b, c});
    int32_t mn = node("Min", "mn", 2, (int32_t[]){a, b});
    int32_t sm = node("Sum", "sm", 3, (int32_t[]){a, b, c});
    int32_t me = node("Mean", "me", 2, (int32_t[]){a, b});
    infer_ok();
    ck_assert_str_eq(type_of(mx), "float32[2,3]");
    expect_vals(mx, 6, (double[]){2, 5, 3, 6, 6, 6});
    expect_vals(mn, 3, (double[]){1, 2, 2});
    expect_vals(sm, 6, (double[]){3, 7, 5, 9, 13, 11});
    expect_vals(me, 3, (double[]){1.5, 3.5, 2.5});
}
END_TEST

START_TEST(clip_bounds_by_opset)
{
    opset(6);
    int32_t x = konst("x", MP_FLOAT, 1, (int64_t[]){3}, (double[]){-2, 0.5, 9});
    int32_t y = node("Clip", "y", 1, &x);
    attr_float("min", -1);
    attr_float("max", 1);
    infer_ok();
    expect_vals(y, 3, (double[]){-1, 0.5, 1});

    mp_graph_free(g);
    setup();
    opset(13);
    x = konst("x", MP_INT64, 1, (int64_t[]){3}, (double[]){-2, 0, 9});
    int32_t lo = konst("lo", MP_INT64, 0, NULL, (double[]){-1});
    int32_t none = -1;
    y = node("Clip", "y", 3, (int32_t[]){x, lo, none});
    infer_ok();
    expect_vals(y, 3, (double[]){-1, 0, 9});
}
END_TEST

START_TEST(casts_and_bitcast_fold)
{
    int32_t s = konst("s", MP_INT64, 1, (int64_t[]){2}, (double[]){3, 70000});
    int32_t c16 = node("Cast", "c16", 1, &s);
    attr_int("to", MP_INT16);
    int32_t ch = node("Cast", "ch", 1, &s);
    attr_int("to", MP_FLOAT16);
    int32_t f = konst("f", MP_FLOAT, 1, (int64_t[]){1}, (double[]){1.0});
    int32_t bc = node("BitCast", "bc", 1, &f);
    attr_int("to", MP_INT32);
    infer_ok();
    expect_vals(c16, 2, (double[]){3, (int16_t)70000});
    expect_vals(ch, 2, (double[]){3, INFINITY}); /* 70000 overflows fp16 */
    expect_vals(bc, 1, (double[]){0x3f800000});
}
END_TEST

START_TEST(bitcast_needs_equal_widths)
{
    int32_t x = input("x", MP_INT8, 1, (int64_t[]){4});
    node("BitCast", "y", 1, &x);
    attr_int("to", MP_INT32);
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "widths differ"), "%s", err.msg);
}
END_TEST

/* ---- symbolic shape vectors --------------------------------------------------------- */

START_TEST(shape_vectors_keep_symbols)
{
    mp_dim batch = mp_sym_dim(g, "batch");
    int32_t sh = shape_vec("sh", 2, (mp_dim[]){batch, mp_dim_of(3)});
    int32_t ones = konst_i64("ones", 1, (int64_t[]){2}, (int64_t[]){1, 1});
    int32_t zero = konst_i64("zero", 0, NULL, (int64_t[]){0});
    int32_t minus1 = konst_i64("minus1", 0, NULL, (int64_t[]){-1});
    int32_t two = konst_i64("two", 0, NULL, (int64_t[]){2});
    int32_t mul = node("Mul", "mul", 2, (int32_t[]){sh, ones});
    int32_t add = node("Add", "add", 2, (int32_t[]){zero, sh});
    int32_t eq = node("Equal", "eq", 2, (int32_t[]){sh, minus1});
    int32_t wh = node("Where", "wh", 3, (int32_t[]){eq, ones, sh});
    int32_t sub = node("Sub", "sub", 2, (int32_t[]){sh, sh});
    int32_t div = node("Div", "div", 2, (int32_t[]){sh, two});
    int32_t c32 = node("Cast", "c32", 1, &wh);
    attr_int("to", MP_INT32);
    int32_t c64 = node("Cast", "c64", 1, &c32);
    attr_int("to", MP_INT64);
    int32_t mx = node("Max", "mx", 2, (int32_t[]){sh, zero});
    infer_ok();
    const int32_t same[] = {mul, add, wh, c32, c64, mx};
    for (int k = 0; k < 6; k++) {
        mp_dim d[2];
        ck_assert_msg(mp_const_dims(g, &g->values[same[k]], d, 2) == 2, "'%s' lost its entries",
                      g->values[same[k]].name);
        ck_assert_msg(d[0].sym == batch.sym && d[0].v < 0 && d[1].v == 3, "'%s' is not {batch, 3}",
                      g->values[same[k]].name);
    }
    ck_assert_int_eq(g->values[c32].dtype, MP_INT32);
    expect_vals(eq, 2, (double[]){0, 0}); /* a dim is never -1 */
    expect_vals(sub, 2, (double[]){0, 0});
    mp_dim d[2];
    ck_assert_int_eq(mp_const_dims(g, &g->values[div], d, 2), 2);
    ck_assert(d[0].v < 0 && d[0].sym < 0 && d[1].v == 1); /* batch / 2 is not a dim */
}
END_TEST

START_TEST(bound_symbol_folds_fully)
{
    mp_dim batch = mp_sym_dim(g, "batch");
    mp_symbol_bind(g, "batch", 8);
    int32_t sh = shape_vec("sh", 2, (mp_dim[]){batch, mp_dim_of(3)});
    int32_t two = konst_i64("two", 0, NULL, (int64_t[]){2});
    int32_t div = node("Div", "div", 2, (int32_t[]){sh, two});
    infer_ok();
    expect_vals(div, 2, (double[]){4, 1});
}
END_TEST

/* PyTorch's expand(n, -1, -1): Where(Equal(shape, -1), 1, shape) keeps -1
 * apart from an unknown entry, so the Expand target stays {batch, 1, 1}. */
START_TEST(minus_one_entries_survive)
{
    mp_dim batch = mp_sym_dim(g, "batch");
    mp_dim lit = {-1, MP_SYM_LITERAL};
    int32_t sh = shape_vec("sh", 3, (mp_dim[]){batch, lit, lit});
    int32_t m1 = konst_i64("m1", 1, (int64_t[]){3}, (int64_t[]){-1, -1, -1});
    int32_t ones = konst_i64("ones", 1, (int64_t[]){3}, (int64_t[]){1, 1, 1});
    int32_t eq = node("Equal", "eq", 2, (int32_t[]){sh, m1});
    int32_t wh = node("Where", "wh", 3, (int32_t[]){eq, ones, sh});
    int32_t un = shape_vec("un", 1, (mp_dim[]){MP_DIM_UNKNOWN});
    int32_t equn = node("Equal", "equn", 2, (int32_t[]){un, m1});
    infer_ok();
    expect_vals(eq, 3, (double[]){0, 1, 1});
    mp_dim d[3];
    ck_assert_int_eq(mp_const_dims(g, &g->values[wh], d, 3), 3);
    ck_assert(d[0].sym == batch.sym && d[1].v == 1 && d[2].v == 1);
    ck_assert_ptr_null(g->values[equn].konst); /* an unknown entry may be -1 */
    /* known tensors read back their negative entries as literals */
    ck_assert_int_eq(mp_const_dims(g, &g->values[m1], d, 3), 3);
    ck_assert(d[0].v == -1 && d[0].sym == MP_SYM_LITERAL);
}
END_TEST

START_TEST(legacy_broadcast_before_opset_7)
{
    opset(6);
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){2, 3, 4, 5});
    int32_t b = input("b", MP_FLOAT, 1, (int64_t[]){3});
    int32_t add = node("Add", "add", 2, (int32_t[]){x, b});
    attr_int("broadcast", 1);
    attr_int("axis", 1);
    int32_t pr = node("PRelu", "pr", 2, (int32_t[]){x, b}); /* slope per channel */
    infer_ok();
    ck_assert_str_eq(type_of(add), "float32[2,3,4,5]");
    ck_assert_str_eq(type_of(pr), "float32[2,3,4,5]");

    mp_graph_free(g);
    setup();
    opset(9);
    x = input("x", MP_FLOAT, 2, (int64_t[]){2, 3});
    b = input("b", MP_FLOAT, 3, (int64_t[]){1, 2, 3});
    node("PRelu", "pr", 2, (int32_t[]){x, b});
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "does not broadcast to the shape of X"), "%s", err.msg);
}
END_TEST

/* ---- reductions and axis ops ---------------------------------------------------------- */

START_TEST(reduce_axes_attribute_and_input)
{
    opset(11);
    int32_t x = konst("x", MP_INT64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    int32_t s = node("ReduceSum", "s", 1, &x);
    attr_ints("axes", 1, (int64_t[]){1});
    attr_int("keepdims", 0);
    int32_t p = node("ReduceProd", "p", 1, &x);
    int32_t m = node("ReduceMax", "m", 1, &x);
    attr_ints("axes", 1, (int64_t[]){-2});
    infer_ok();
    ck_assert_str_eq(type_of(s), "int64[2]");
    expect_vals(s, 2, (double[]){6, 15});
    ck_assert_str_eq(type_of(p), "int64[1,1]");
    expect_vals(p, 1, (double[]){720});
    ck_assert_str_eq(type_of(m), "int64[1,3]");
    expect_vals(m, 3, (double[]){4, 5, 6});

    mp_graph_free(g);
    setup();
    opset(18);
    x = konst("x", MP_FLOAT, 2, (int64_t[]){2, 2}, (double[]){3, 4, 0, 1});
    int32_t ax = konst_i64("ax", 1, (int64_t[]){1}, (int64_t[]){1});
    int32_t l2 = node("ReduceL2", "l2", 2, (int32_t[]){x, ax});
    int32_t mean = node("ReduceMean", "mean", 1, &x);
    attr_int("keepdims", 0);
    int32_t none = konst_i64("none", 1, (int64_t[]){0}, (int64_t[]){0});
    int32_t id = node("ReduceLogSumExp", "id", 2, (int32_t[]){x, none});
    attr_int("noop_with_empty_axes", 1);
    infer_ok();
    ck_assert_str_eq(type_of(l2), "float32[2,1]");
    expect_vals(l2, 2, (double[]){5, 1});
    ck_assert_str_eq(type_of(mean), "float32[]");
    expect_vals(mean, 1, (double[]){2});
    ck_assert_str_eq(type_of(id), "float32[2,2]");
}
END_TEST

START_TEST(reduce_unknown_axes_and_errors)
{
    opset(18);
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 1, 4});
    int32_t ax = input("ax", MP_INT64, 1, (int64_t[]){2});
    int32_t k = node("ReduceMax", "k", 2, (int32_t[]){x, ax});
    int32_t d = node("ReduceMax", "d", 2, (int32_t[]){x, ax});
    attr_int("keepdims", 0);
    infer_ok();
    ck_assert_str_eq(type_of(k), "float32[?,1,?]");
    ck_assert_str_eq(type_of(d), "float32[?]");

    int32_t bad = konst_i64("bad", 1, (int64_t[]){2}, (int64_t[]){0, -3});
    node("ReduceSum", "dup", 2, (int32_t[]){x, bad});
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "twice"), "%s", err.msg);
}
END_TEST

START_TEST(softmax_axis_by_opset)
{
    opset(11);
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){2, 3, 4});
    int32_t y = node("Softmax", "y", 1, &x);
    attr_int("axis", 3); /* 2-D coercion at the end: allowed before 13 */
    infer_ok();
    ck_assert_str_eq(type_of(y), "float32[2,3,4]");

    mp_graph_free(g);
    setup();
    opset(13);
    x = input("x", MP_FLOAT, 3, (int64_t[]){2, 3, 4});
    node("LogSoftmax", "y", 1, &x);
    attr_int("axis", 3);
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "axis 3 is out of range for rank 3"), "%s", err.msg);
}
END_TEST

START_TEST(cumsum_det_argmin)
{
    int32_t x = input("x", MP_DOUBLE, 4, (int64_t[]){-1, 2, 3, 3});
    int32_t ax = konst_i64("ax", 0, NULL, (int64_t[]){-1});
    int32_t cs = node("CumSum", "cs", 2, (int32_t[]){x, ax});
    int32_t det = node("Det", "det", 1, &x);
    int32_t am = node("ArgMin", "am", 1, &x);
    attr_int("axis", 1);
    infer_ok();
    ck_assert_str_eq(type_of(cs), "float64[batch,2,3,3]");
    ck_assert_str_eq(type_of(det), "float64[batch,2]");
    ck_assert_str_eq(type_of(am), "int64[batch,1,3,3]");

    int32_t r = input("r", MP_FLOAT, 2, (int64_t[]){2, 3});
    node("Det", "bad", 1, &r);
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, "2x3"), "%s", err.msg);
}
END_TEST

/* ---- random and strings ----------------------------------------------------------------- */

START_TEST(random_generators)
{
    int32_t none = -1;
    int32_t u = node("RandomUniform", "u", 0, &none);
    attr_ints("shape", 2, (int64_t[]){3, 4});
    attr_int("dtype", MP_DOUBLE);
    int32_t x = input("x", MP_FLOAT16, 2, (int64_t[]){-1, 10});
    int32_t nl = node("RandomNormalLike", "nl", 1, &x);
    int32_t b = node("Bernoulli", "b", 1, &x);
    attr_int("dtype", MP_INT32);
    int32_t m = node("Multinomial", "m", 1, &x);
    attr_int("sample_size", 5);
    infer_ok();
    ck_assert_str_eq(type_of(u), "float64[3,4]");
    ck_assert_str_eq(type_of(nl), "float16[batch,10]");
    ck_assert_str_eq(type_of(b), "int32[batch,10]");
    ck_assert_str_eq(type_of(m), "int32[batch,5]");
}
END_TEST

START_TEST(string_ops_fold)
{
    int32_t x = konst_str("x", 1, (int64_t[]){3}, (const char *[]){"a,b", "", "x,,y,"});
    int32_t ys[2] = {mp_graph_add_value(g, "y"), mp_graph_add_value(g, "z")};
    mp_graph_add_node(g, "split", "StringSplit", "", 1, &x, 2, ys);
    attr_str("delimiter", ",");
    int32_t w = konst_str("w", 2, (int64_t[]){1, 3}, (const char *[]){"  one two ", "three", ""});
    int32_t ws[2] = {mp_graph_add_value(g, "wy"), mp_graph_add_value(g, "wz")};
    mp_graph_add_node(g, "wsplit", "StringSplit", "", 1, &w, 2, ws);
    attr_int("maxsplit", 1);
    int32_t nm = node("StringNormalizer", "nm", 1, &x);
    attr_strings("stopwords", 1, (const char *[]){"A,B"});
    attr_str("case_change_action", "UPPER");
    int32_t sfx = konst_str("sfx", 0, NULL, (const char *[]){"!"});
    int32_t cat = node("StringConcat", "cat", 2, (int32_t[]){x, sfx});
    infer_ok();
    ck_assert_str_eq(type_of(ys[0]), "string[3,4]");
    expect_vals(ys[1], 3, (double[]){2, 1, 4});
    const char *const *parts = konst_of(ys[0])->data;
    ck_assert_str_eq(parts[4], "");
    ck_assert_str_eq(parts[9], "");
    ck_assert_str_eq(parts[10], "y");
    ck_assert_str_eq(type_of(ws[0]), "string[1,3,2]");
    expect_vals(ws[1], 3, (double[]){2, 1, 0});
    ck_assert_str_eq(((const char *const *)konst_of(ws[0])->data)[1], "two ");
    ck_assert_str_eq(type_of(nm), "string[2]");
    ck_assert_str_eq(((const char *const *)konst_of(nm)->data)[1], "X,,Y,");
    ck_assert_str_eq(((const char *const *)konst_of(cat)->data)[2], "x,,y,!");
}
END_TEST

START_TEST(string_ops_unknown_contents)
{
    int32_t x = input("x", MP_STRING, 2, (int64_t[]){1, 5});
    int32_t nm = node("StringNormalizer", "nm", 1, &x);
    attr_strings("stopwords", 1, (const char *[]){"the"});
    int32_t rm = node("RegexFullMatch", "rm", 1, &x);
    attr_str("pattern", "a+");
    infer_ok();
    ck_assert_str_eq(type_of(nm), "string[1,?]");
    ck_assert_str_eq(type_of(rm), "bool[1,5]");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shape_elementwise");
    TCase *tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, broadcast_keeps_symbols);
    tcase_add_test(tc, broadcast_error_names_dims);
    tcase_add_test(tc, mixed_dtypes_are_rejected);
    tcase_add_test(tc, float_only_op_rejects_ints);
    tcase_add_test(tc, output_dtypes);
    tcase_add_test(tc, unknown_rank_propagates);
    tcase_add_test(tc, integer_arithmetic_folds_like_onnx);
    tcase_add_test(tc, float_and_half_fold);
    tcase_add_test(tc, logic_comparison_where_fold);
    tcase_add_test(tc, unsigned_64_compares_unsigned);
    tcase_add_test(tc, variadic_fold_broadcasts);
    tcase_add_test(tc, clip_bounds_by_opset);
    tcase_add_test(tc, casts_and_bitcast_fold);
    tcase_add_test(tc, bitcast_needs_equal_widths);
    tcase_add_test(tc, shape_vectors_keep_symbols);
    tcase_add_test(tc, bound_symbol_folds_fully);
    tcase_add_test(tc, minus_one_entries_survive);
    tcase_add_test(tc, legacy_broadcast_before_opset_7);
    tcase_add_test(tc, reduce_axes_attribute_and_input);
    tcase_add_test(tc, reduce_unknown_axes_and_errors);
    tcase_add_test(tc, softmax_axis_by_opset);
    tcase_add_test(tc, cumsum_det_argmin);
    tcase_add_test(tc, random_generators);
    tcase_add_test(tc, string_ops_fold);
    tcase_add_test(tc, string_ops_unknown_contents);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
