/* test_shape_tensor.c - shape rules and folding of the data-movement ops
 * (ir/ops/tensor.def), on tiny graphs built with the IR API: shapes, folded
 * values, symbolic shape vectors through torch-style chains, and errors. */
#include <check.h>
#include <stdio.h>
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

/* A graph input; dims as ints, -1 for the symbol "batch", -2 for "seq". */
static int32_t input(const char *name, mp_dtype t, int rank, const int64_t *d)
{
    int32_t id = mp_graph_add_value(g, name);
    mp_dim dims[MP_MAX_RANK];
    for (int i = 0; i < rank; i++)
        dims[i] = d[i] == -1 ? mp_sym_dim(g, "batch") : d[i] == -2 ? mp_sym_dim(g, "seq") : mp_dim_of(d[i]);
    mp_value_set(g, id, t, rank, rank >= 0 ? dims : NULL);
    g->values[id].flags |= MP_VAL_INPUT;
    int32_t *ins = mp_arena_alloc(g->arena, (size_t)(g->ninputs + 1) * sizeof *ins);
    if (g->ninputs) memcpy(ins, g->inputs, (size_t)g->ninputs * sizeof *ins);
    ins[g->ninputs++] = id;
    g->inputs = ins;
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

/* A 1-D int64 initializer. */
static int32_t ints(const char *name, int n, const int64_t *vals)
{
    int64_t len = n;
    int32_t id = konst(name, MP_INT64, 1, &len, (double[64]){0});
    if (n) memcpy(g->values[id].konst->data, vals, (size_t)n * sizeof *vals);
    return id;
}

/* A 0-D int64 initializer. */
static int32_t scalar(const char *name, int64_t v) { return konst(name, MP_INT64, 0, NULL, (double[]){(double)v}); }

/* Adds node op(ins) -> nout new outputs named out, out.1, ...; returns the first output's id. */
static int32_t node_n(const char *op, const char *out, int nin, const int32_t *ins, int nout)
{
    int32_t ys[16];
    for (int k = 0; k < nout; k++) {
        char name[64];
        if (k)
            snprintf(name, sizeof name, "%s.%d", out, k);
        else
            snprintf(name, sizeof name, "%s", out);
        ys[k] = mp_graph_add_value(g, name);
    }
    mp_graph_add_node(g, out, op, "", nin, ins, nout, ys);
    return ys[0];
}

static int32_t node(const char *op, const char *out, int nin, const int32_t *ins)
{
    return node_n(op, out, nin, ins, 1);
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
static void attr_str(const char *name, const char *v) { add_attr(name, MP_ATTR_STRING)->s = v; }
static void attr_ints(const char *name, int n, const int64_t *v)
{
    mp_attr *a = add_attr(name, MP_ATTR_INTS);
    a->n = n;
    a->ints = mp_arena_dup(g->arena, v, (size_t)(n ? n : 1) * sizeof *v);
}
static void attr_floats(const char *name, int n, const float *v)
{
    mp_attr *a = add_attr(name, MP_ATTR_FLOATS);
    a->n = n;
    a->floats = mp_arena_dup(g->arena, v, (size_t)n * sizeof *v);
}
static void attr_tensor(const char *name, mp_tensor *t)
{
    mp_attr *a = add_attr(name, MP_ATTR_TENSOR);
    a->tensors = mp_arena_alloc(g->arena, sizeof *a->tensors);
    a->tensors[0] = t;
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

/* The value's type as text, e.g. "float32[batch,12]". */
static const char *type_of(int32_t id)
{
    static char buf[256];
    return mp_value_type_str(g, &g->values[id], buf, sizeof buf);
}

static void check_type(int32_t id, const char *want) { ck_assert_str_eq(type_of(id), want); }

/* Checks the folded contents of id, read as int64. */
static void check_ints(int32_t id, int n, const int64_t *want)
{
    const mp_tensor *k = g->values[id].konst;
    ck_assert_msg(k != NULL, "'%s' was not folded", g->values[id].name);
    ck_assert_int_eq(k->numel, n);
    for (int i = 0; i < n; i++) ck_assert_int_eq(mp_tensor_get_i64(k, i), want[i]);
}

static void check_fails(const char *needle)
{
    ck_assert_int_eq(infer(), -1);
    ck_assert_msg(strstr(err.msg, needle), "error '%s' lacks '%s'", err.msg, needle);
}

/* ---- torch.onnx.export shape chains ------------------------------------- */

/* Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): the batch stays
 * symbolic and the -1 cancels it, before binding and after. */
START_TEST(torch_chain_keeps_batch_symbolic)
{
    opset(13);
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 3, 4});
    int32_t s = node("Shape", "s", 1, &x);
    int32_t b = node("Gather", "b", 2, (int32_t[]){s, scalar("zero", 0)});
    int32_t u = node("Unsqueeze", "u", 2, (int32_t[]){b, ints("ax", 1, (int64_t[]){0})});
    int32_t c = node("Concat", "c", 2, (int32_t[]){u, ints("m1", 1, (int64_t[]){-1})});
    attr_int("axis", 0);
    int32_t y = node("Reshape", "y", 2, (int32_t[]){x, c});
    infer_ok();
    check_type(s, "int64[3]");
    ck_assert_int_eq(g->values[s].nsymdata, 3);
    check_type(b, "int64[]");
    ck_assert_int_eq(g->values[b].symdata[0].sym, mp_symbol_find(g, "batch"));
    ck_assert_int_eq(g->values[c].nsymdata, 2);
    check_type(y, "float32[batch,12]");
}
END_TEST

START_TEST(torch_chain_folds_once_batch_is_bound)
{
    opset(13);
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 3, 4});
    int32_t s = node("Shape", "s", 1, &x);
    int32_t b = node("Gather", "b", 2, (int32_t[]){s, scalar("zero", 0)});
    int32_t u = node("Unsqueeze", "u", 2, (int32_t[]){b, ints("ax", 1, (int64_t[]){0})});
    int32_t c = node("Concat", "c", 2, (int32_t[]){u, ints("m1", 1, (int64_t[]){-1})});
    attr_int("axis", 0);
    int32_t y = node("Reshape", "y", 2, (int32_t[]){x, c});
    mp_bindings bind = {.batch = 8};
    ck_assert_int_eq(mp_bind_dims(g, &bind, &err), 0);
    infer_ok();
    check_ints(c, 2, (int64_t[]){8, -1});
    check_type(y, "float32[8,12]");
    ck_assert_int_eq(g->values[y].bytes, 8 * 12 * 4);
}
END_TEST

/* The light models' weights: ConstantOfShape of an int64 initializer. */
START_TEST(constant_of_shape_gives_weight_shapes)
{
    int32_t s = ints("w__SHAPE", 4, (int64_t[]){64, 3, 7, 7});
    int32_t w = node("ConstantOfShape", "w", 1, &s);
    mp_tensor *v = mp_tensor_new(g->arena, MP_FLOAT, 1, (int64_t[]){1});
    ((float *)v->data)[0] = 0.02f;
    attr_tensor("value", v);
    int32_t s2 = ints("small", 2, (int64_t[]){2, 3});
    int32_t z = node("ConstantOfShape", "z", 1, &s2);
    infer_ok();
    check_type(w, "float32[64,3,7,7]");
    ck_assert_int_eq(g->values[w].bytes, 64 * 3 * 7 * 7 * 4);
    ck_assert_ptr_nonnull(g->values[w].konst); /* 9,408 elements: small enough to hold */
    ck_assert(((float *)g->values[w].konst->data)[9407] == 0.02f);
    check_type(z, "float32[2,3]");
    ck_assert(mp_tensor_get_f64(g->values[z].konst, 5) == 0);
}
END_TEST

START_TEST(constant_of_shape_takes_symbolic_shape)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){-1, 5});
    int32_t s = node("Shape", "s", 1, &x);
    int32_t z = node("ConstantOfShape", "z", 1, &s);
    int32_t huge = ints("huge", 2, (int64_t[]){1 << 20, 1 << 20});
    int32_t h = node("ConstantOfShape", "h", 1, &huge);
    infer_ok();
    check_type(z, "float32[batch,5]");
    ck_assert_ptr_null(g->values[z].konst);
    check_type(h, "float32[1048576,1048576]");
    ck_assert_ptr_null(g->values[h].konst); /* far too big to fold */
}
END_TEST

START_TEST(shape_start_end_and_size)
{
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){-1, 3, 8, 8});
    int32_t s = node("Shape", "s", 1, &x);
    attr_int("start", 1);
    attr_int("end", -1);
    int32_t s2 = node("Shape", "s2", 1, &x);
    attr_int("start", -10); /* clamped to 0 */
    attr_int("end", 1);
    int32_t n = node("Size", "n", 1, &x);
    int32_t y = input("y", MP_FLOAT, 2, (int64_t[]){4, 5});
    int32_t m = node("Size", "m", 1, &y);
    infer_ok();
    check_ints(s, 2, (int64_t[]){3, 8});
    check_type(s2, "int64[1]");
    ck_assert_int_eq(g->values[s2].symdata[0].sym, mp_symbol_find(g, "batch"));
    check_type(n, "int64[]");
    ck_assert_ptr_null(g->values[n].konst); /* batch * 192 is no single dim */
    check_ints(m, 1, (int64_t[]){20});
}
END_TEST

/* Range(0, n, 1) where n is a dim has length n; known inputs fold. */
START_TEST(range_lengths_and_values)
{
    int32_t x = input("x", MP_INT64, 2, (int64_t[]){-1, -2});
    int32_t s = node("Shape", "s", 1, &x);
    int32_t n = node("Gather", "n", 2, (int32_t[]){s, scalar("one", 1)});
    int32_t r = node("Range", "r", 3, (int32_t[]){scalar("z", 0), n, scalar("d", 1)});
    int32_t q = node("Range", "q", 3, (int32_t[]){scalar("a", 10), scalar("b", 3), scalar("c", -3)});
    int32_t f =
        node("Range", "f", 3,
             (int32_t[]){konst("fa", MP_FLOAT, 0, NULL, (double[]){1}), konst("fb", MP_FLOAT, 0, NULL, (double[]){2}),
                         konst("fc", MP_FLOAT, 0, NULL, (double[]){0.3})});
    infer_ok();
    check_type(r, "int64[seq]");
    check_ints(q, 3, (int64_t[]){10, 7, 4});
    check_type(f, "float32[4]");
    ck_assert(mp_tensor_get_f64(g->values[f].konst, 3) > 1.89 && mp_tensor_get_f64(g->values[f].konst, 3) < 1.91);
}
END_TEST

START_TEST(range_rejects_zero_delta)
{
    node("Range", "r", 3, (int32_t[]){scalar("a", 0), scalar("b", 3), scalar("c", 0)});
    check_fails("delta is 0");
}
END_TEST

/* ---- Reshape, Flatten, Squeeze, Unsqueeze, Transpose --------------------- */

START_TEST(reshape_names_the_sizes_it_cannot_match)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){2, 3});
    node("Reshape", "y", 2, (int32_t[]){x, ints("s", 2, (int64_t[]){4, -1})});
    check_fails("cannot reshape 6 elements into [4,-1]");
}
END_TEST

START_TEST(reshape_rejects_two_minus_ones)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){2, 3});
    node("Reshape", "y", 2, (int32_t[]){x, ints("s", 2, (int64_t[]){-1, -1})});
    check_fails("more than one -1");
}
END_TEST

START_TEST(reshape_checks_counts_across_symbols)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 3, 4});
    node("Reshape", "y", 2, (int32_t[]){x, ints("s", 3, (int64_t[]){0, 4, 0})});
    check_fails("cannot reshape float32[batch,3,4] into [0,4,0]");
}
END_TEST

START_TEST(reshape_zero_copies_unless_allowzero)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 3, 4});
    int32_t a = node("Reshape", "a", 2, (int32_t[]){x, ints("s", 4, (int64_t[]){0, 0, 2, 2})});
    int32_t e = input("e", MP_FLOAT, 2, (int64_t[]){0, 4});
    int32_t b = node("Reshape", "b", 2, (int32_t[]){e, ints("t", 3, (int64_t[]){2, 0, 3})});
    attr_int("allowzero", 1);
    int32_t c = node("Reshape", "c", 2, (int32_t[]){e, ints("u", 2, (int64_t[]){8, -1})});
    infer_ok();
    check_type(a, "float32[batch,3,2,2]");
    check_type(b, "float32[2,0,3]");
    check_type(c, "float32[8,0]");
}
END_TEST

START_TEST(reshape_folds_known_data_and_reshape1_attr)
{
    opset(1);
    int32_t x = ints("x", 6, (int64_t[]){1, 2, 3, 4, 5, 6});
    int32_t y = node("Reshape", "y", 1, &x);
    attr_ints("shape", 2, (int64_t[]){3, 2});
    int32_t f = node("Flatten", "f", 1, &y);
    attr_int("axis", 0);
    infer_ok();
    check_type(y, "int64[3,2]");
    check_ints(y, 6, (int64_t[]){1, 2, 3, 4, 5, 6});
    check_type(f, "int64[1,6]");
}
END_TEST

START_TEST(flatten_negative_axis_counts_from_the_end)
{
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){-1, 3, 4, 5});
    int32_t a = node("Flatten", "a", 1, &x);
    attr_int("axis", -1);
    int32_t b = node("Flatten", "b", 1, &x);
    int32_t c = node("Flatten", "c", 1, &x);
    attr_int("axis", 4);
    infer_ok();
    check_type(a, "float32[?,5]");
    check_type(b, "float32[batch,60]");
    check_type(c, "float32[?,1]");
}
END_TEST

START_TEST(squeeze_and_unsqueeze_by_attribute_and_input)
{
    opset(11);
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){-1, 1, 5, 1});
    int32_t a = node("Squeeze", "a", 1, &x);
    attr_ints("axes", 1, (int64_t[]){-1});
    int32_t b = node("Squeeze", "b", 2, (int32_t[]){x, ints("ax", 2, (int64_t[]){1, 3})});
    int32_t k = input("k", MP_FLOAT, 3, (int64_t[]){2, 1, 1});
    int32_t c = node("Squeeze", "c", 1, &k); /* every 1 */
    int32_t d = node("Unsqueeze", "d", 1, &x);
    attr_ints("axes", 2, (int64_t[]){0, -1});
    int32_t e = node("Unsqueeze", "e", 2, (int32_t[]){c, ints("ay", 2, (int64_t[]){2, 0})});
    infer_ok();
    check_type(a, "float32[batch,1,5]");
    check_type(b, "float32[batch,5]");
    check_type(c, "float32[2]");
    check_type(d, "float32[1,batch,1,5,1,1]");
    check_type(e, "float32[1,2,1]");
}
END_TEST

START_TEST(squeeze_rejects_a_dim_not_one)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){3, 1});
    node("Squeeze", "a", 2, (int32_t[]){x, ints("ax", 1, (int64_t[]){0})});
    check_fails("cannot squeeze axis 0 of size 3");
}
END_TEST

START_TEST(transpose_moves_dims_and_values)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 3, 4});
    int32_t a = node("Transpose", "a", 1, &x);
    attr_ints("perm", 3, (int64_t[]){0, 2, 1});
    int32_t b = node("Transpose", "b", 1, &x);
    int32_t k = konst("k", MP_INT32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    int32_t t = node("Transpose", "t", 1, &k);
    infer_ok();
    check_type(a, "float32[batch,4,3]");
    check_type(b, "float32[4,3,batch]");
    check_type(t, "int32[3,2]");
    check_ints(t, 6, (int64_t[]){1, 4, 2, 5, 3, 6});
}
END_TEST

START_TEST(transpose_rejects_a_bad_perm)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){2, 3, 4});
    node("Transpose", "a", 1, &x);
    attr_ints("perm", 3, (int64_t[]){0, 1, 1});
    check_fails("not a permutation");
}
END_TEST

/* ---- Concat, Split, Slice ---------------------------------------------------- */

START_TEST(concat_sums_the_axis_and_checks_the_rest)
{
    int32_t a = input("a", MP_FLOAT, 2, (int64_t[]){-1, 3});
    int32_t b = input("b", MP_FLOAT, 2, (int64_t[]){-1, 5});
    int32_t c = node("Concat", "c", 2, (int32_t[]){a, b});
    attr_int("axis", -1);
    int32_t k = node("Concat", "k", 3,
                     (int32_t[]){ints("p", 2, (int64_t[]){1, 2}), ints("q", 0, NULL), ints("r", 1, (int64_t[]){3})});
    attr_int("axis", 0);
    infer_ok();
    check_type(c, "float32[batch,8]");
    check_ints(k, 3, (int64_t[]){1, 2, 3});
}
END_TEST

START_TEST(concat_rejects_mismatched_dims)
{
    int32_t a = input("a", MP_FLOAT, 2, (int64_t[]){2, 3});
    int32_t b = input("b", MP_FLOAT, 2, (int64_t[]){4, 3});
    node("Concat", "c", 2, (int32_t[]){a, b});
    attr_int("axis", 1);
    check_fails("dims 2 and 4 differ at axis 0");
}
END_TEST

START_TEST(split_forms_of_every_opset)
{
    opset(18);
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){-1, 7});
    int32_t a = node_n("Split", "a", 1, &x, 3);
    attr_int("axis", 1);
    attr_int("num_outputs", 3); /* 3, 3, 1 */
    int32_t b = node_n("Split", "b", 2, (int32_t[]){x, ints("sp", 2, (int64_t[]){2, 5})}, 2);
    attr_int("axis", -1);
    int32_t v = ints("v", 4, (int64_t[]){10, 11, 12, 13});
    int32_t c = node_n("Split", "c", 1, &v, 2); /* equal halves, values folded */
    infer_ok();
    check_type(a, "float32[batch,3]");
    check_type(a + 2, "float32[batch,1]");
    check_type(b + 1, "float32[batch,5]");
    check_ints(c, 2, (int64_t[]){10, 11});
    check_ints(c + 1, 2, (int64_t[]){12, 13});
}
END_TEST

START_TEST(split_rejects_parts_that_do_not_sum)
{
    opset(2);
    int32_t x = input("x", MP_FLOAT, 1, (int64_t[]){6});
    node_n("Split", "a", 1, &x, 2);
    attr_ints("split", 2, (int64_t[]){2, 3});
    check_fails("sums to 5 but axis 0 has size 6");
}
END_TEST

START_TEST(slice_clamps_steps_and_folds)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 10, 6});
    int32_t big = ints("big", 1, (int64_t[]){INT64_MAX});
    int32_t a = node("Slice", "a", 5,
                     (int32_t[]){x, ints("s", 2, (int64_t[]){1, -1}), ints("e", 2, (int64_t[]){1000, -1000}),
                                 ints("ax", 2, (int64_t[]){1, 2}), ints("st", 2, (int64_t[]){3, -2})});
    int32_t b = node("Slice", "b", 4, (int32_t[]){x, ints("z", 1, (int64_t[]){0}), big, ints("a0", 1, (int64_t[]){0})});
    int32_t v = ints("v", 5, (int64_t[]){0, 1, 2, 3, 4});
    int32_t c = node("Slice", "c", 5,
                     (int32_t[]){v, ints("s4", 1, (int64_t[]){4}), ints("e0", 1, (int64_t[]){0}),
                                 ints("a1", 1, (int64_t[]){0}), ints("m2", 1, (int64_t[]){-2})});
    infer_ok();
    check_type(a, "float32[batch,3,3]");
    check_type(b, "float32[batch,10,6]"); /* all of a symbolic dim */
    check_ints(c, 2, (int64_t[]){4, 2});
}
END_TEST

START_TEST(slice_of_a_symbolic_shape_vector)
{
    opset(9); /* Slice-1: starts, ends, axes are attributes */
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){-1, -2, 4, 5});
    int32_t s = node("Shape", "s", 1, &x);
    int32_t h = node("Slice", "h", 1, &s);
    attr_ints("starts", 1, (int64_t[]){0});
    attr_ints("ends", 1, (int64_t[]){2});
    int32_t c = node("Concat", "c", 2, (int32_t[]){h, ints("m", 1, (int64_t[]){-1})});
    attr_int("axis", 0);
    int32_t y = node("Reshape", "y", 2, (int32_t[]){x, c});
    infer_ok();
    ck_assert_int_eq(g->values[h].nsymdata, 2);
    check_type(y, "float32[batch,seq,20]");
}
END_TEST

/* ---- Expand, Tile, Gather* ------------------------------------------------- */

START_TEST(expand_and_tile)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 1, 4});
    int32_t s = node("Shape", "s", 1, &x);
    int32_t e = node("Expand", "e", 2, (int32_t[]){ints("one", 1, (int64_t[]){7}), s});
    int32_t f = node("Expand", "f", 2, (int32_t[]){x, ints("to", 2, (int64_t[]){3, 1})});
    int32_t t = node("Tile", "t", 2, (int32_t[]){x, ints("r", 3, (int64_t[]){1, 5, 2})});
    int32_t k = node("Tile", "k", 2, (int32_t[]){ints("v", 2, (int64_t[]){1, 2}), ints("r2", 1, (int64_t[]){2})});
    infer_ok();
    check_type(e, "int64[batch,1,4]");
    check_type(f, "float32[batch,3,4]");
    check_type(t, "float32[batch,5,8]");
    check_ints(k, 4, (int64_t[]){1, 2, 1, 2});
}
END_TEST

START_TEST(expand_rejects_incompatible_dims)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){2, 3});
    node("Expand", "e", 2, (int32_t[]){x, ints("t", 2, (int64_t[]){2, 4})});
    check_fails("cannot broadcast dims 3 and 4");
}
END_TEST

START_TEST(gather_shapes_and_values)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 10, 6});
    int32_t i2 = input("i2", MP_INT64, 2, (int64_t[]){2, 5});
    int32_t a = node("Gather", "a", 2, (int32_t[]){x, i2});
    attr_int("axis", 1);
    int32_t tab = konst("tab", MP_FLOAT, 2, (int64_t[]){3, 2}, (double[]){0, 1, 10, 11, 20, 21});
    int32_t b = node("Gather", "b", 2, (int32_t[]){tab, ints("ix", 2, (int64_t[]){2, -3})});
    int32_t ge = node("GatherElements", "ge", 2,
                      (int32_t[]){tab, konst("gi", MP_INT64, 2, (int64_t[]){3, 1}, (double[]){1, 0, 1})});
    attr_int("axis", 1);
    int32_t d = input("d", MP_FLOAT, 3, (int64_t[]){2, 3, 4});
    int32_t nd = node("GatherND", "nd", 2, (int32_t[]){d, input("ni", MP_INT64, 3, (int64_t[]){2, 5, 1})});
    attr_int("batch_dims", 1);
    infer_ok();
    check_type(a, "float32[batch,2,5,6]");
    check_type(b, "float32[2,2]");
    check_ints(b, 4, (int64_t[]){20, 21, 0, 1});
    check_ints(ge, 3, (int64_t[]){1, 10, 21});
    check_type(nd, "float32[2,5,4]");
}
END_TEST

START_TEST(gather_rejects_an_index_out_of_range)
{
    int32_t tab = ints("tab", 3, (int64_t[]){1, 2, 3});
    node("Gather", "b", 2, (int32_t[]){tab, scalar("i", 3)});
    check_fails("index 3 is out of range for an axis of size 3");
}
END_TEST

START_TEST(scatter_folds_without_reduction)
{
    int32_t d = ints("d", 4, (int64_t[]){0, 0, 0, 0});
    int32_t s = node(
        "ScatterND", "s", 3,
        (int32_t[]){d, konst("i", MP_INT64, 2, (int64_t[]){2, 1}, (double[]){3, -4}), ints("u", 2, (int64_t[]){7, 9})});
    int32_t e =
        node("ScatterElements", "e", 3, (int32_t[]){d, ints("j", 1, (int64_t[]){1}), ints("w", 1, (int64_t[]){5})});
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){-1, 3});
    int32_t r =
        node("ScatterElements", "r", 3,
             (int32_t[]){x, input("xi", MP_INT64, 2, (int64_t[]){1, 3}), input("xu", MP_FLOAT, 2, (int64_t[]){1, 3})});
    attr_str("reduction", "max");
    infer_ok();
    check_ints(s, 4, (int64_t[]){9, 0, 0, 7});
    check_ints(e, 4, (int64_t[]){0, 5, 0, 0});
    check_type(r, "float32[batch,3]");
}
END_TEST

/* ---- Pad, Compress, NonZero, Unique, TopK ------------------------------- */

START_TEST(pad_all_opsets_and_modes)
{
    opset(2);
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){-1, 4});
    int32_t a = node("Pad", "a", 1, &x);
    attr_ints("pads", 4, (int64_t[]){0, 1, 0, 2});
    int32_t v = ints("v", 3, (int64_t[]){1, 2, 3});
    int32_t b = node("Pad", "b", 2, (int32_t[]){v, ints("p", 2, (int64_t[]){2, 1})});
    attr_str("mode", "reflect");
    int32_t c = node("Pad", "c", 4,
                     (int32_t[]){v, ints("q", 2, (int64_t[]){1, -1}), scalar("cv", 9), ints("ax", 1, (int64_t[]){-1})});
    infer_ok();
    check_type(a, "float32[batch,7]");
    check_ints(b, 6, (int64_t[]){3, 2, 1, 2, 3, 2});
    check_ints(c, 3, (int64_t[]){9, 1, 2});
}
END_TEST

START_TEST(pad_rejects_a_negative_result)
{
    int32_t x = input("x", MP_FLOAT, 1, (int64_t[]){2});
    node("Pad", "a", 2, (int32_t[]){x, ints("p", 2, (int64_t[]){-2, -1})});
    check_fails("negative");
}
END_TEST

START_TEST(data_dependent_outputs_are_computed_when_known)
{
    int32_t k = konst("k", MP_FLOAT, 2, (int64_t[]){2, 3}, (double[]){0, 1.5, 0, 2, 0, 3});
    int32_t nz = node("NonZero", "nz", 1, &k);
    int32_t u = node_n("Unique", "u", 1,
                       (int32_t[]){konst("uv", MP_INT32, 1, (int64_t[]){6}, (double[]){2, 1, 1, 3, 4, 3})}, 4);
    attr_int("sorted", 0);
    int32_t c = node("Compress", "c", 2, (int32_t[]){k, konst("cond", MP_BOOL, 1, (int64_t[]){2}, (double[]){0, 1})});
    attr_int("axis", 0);
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){-1, 3});
    int32_t nx = node("NonZero", "nx", 1, &x);
    infer_ok();
    check_type(nz, "int64[2,3]");
    check_ints(nz, 6, (int64_t[]){0, 1, 1, 1, 0, 2});
    check_type(u, "int32[4]");
    check_ints(u, 4, (int64_t[]){2, 1, 3, 4});           /* in order of first occurrence */
    check_ints(u + 1, 4, (int64_t[]){0, 1, 3, 4});       /* indices */
    check_ints(u + 2, 6, (int64_t[]){0, 1, 1, 2, 3, 2}); /* inverse_indices */
    check_ints(u + 3, 4, (int64_t[]){1, 2, 2, 1});       /* counts */
    check_type(c, "float32[1,3]");
    check_type(nx, "int64[2,?]");
}
END_TEST

START_TEST(unique_sorted_rows_with_axis)
{
    int32_t k = konst("k", MP_FLOAT, 2, (int64_t[]){3, 2}, (double[]){2, 1, 0, 5, 2, 1});
    int32_t u = node_n("Unique", "u", 1, &k, 4);
    attr_int("axis", 0);
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 3, 4});
    int32_t w = node_n("Unique", "w", 1, &x, 4);
    attr_int("axis", 1);
    infer_ok();
    check_type(u, "float32[2,2]");
    ck_assert(mp_tensor_get_f64(g->values[u].konst, 1) == 5); /* row [0,5] sorts first */
    check_ints(u + 2, 3, (int64_t[]){1, 0, 1});
    check_type(w, "float32[batch,?,4]");
    check_type(w + 2, "int64[3]");
}
END_TEST

START_TEST(topk_onehot_and_friends)
{
    opset(11);
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){-1, 10});
    int32_t t = node_n("TopK", "t", 2, (int32_t[]){x, ints("k", 1, (int64_t[]){3})}, 2);
    int32_t ix = input("ix", MP_INT64, 1, (int64_t[]){-1});
    int32_t o =
        node("OneHot", "o", 3,
             (int32_t[]){ix, konst("dep", MP_FLOAT, 0, NULL, (double[]){5}), ints("vals", 2, (int64_t[]){0, 1})});
    attr_int("axis", 0);
    int32_t e = node("EyeLike", "e", 1, (int32_t[]){input("sq", MP_INT32, 2, (int64_t[]){2, 3})});
    attr_int("dtype", MP_FLOAT);
    attr_int("k", 1);
    int32_t tr = node("Trilu", "tr", 1, &x);
    infer_ok();
    check_type(t, "float32[batch,3]");
    check_type(t + 1, "int64[batch,3]");
    check_type(o, "int64[5,batch]");
    check_type(e, "float32[2,3]");
    ck_assert(mp_tensor_get_f64(g->values[e].konst, 1) == 1 && mp_tensor_get_f64(g->values[e].konst, 5) == 1);
    check_type(tr, "float32[batch,10]");
}
END_TEST

START_TEST(topk_rejects_k_beyond_the_axis)
{
    int32_t x = input("x", MP_FLOAT, 1, (int64_t[]){4});
    node_n("TopK", "t", 2, (int32_t[]){x, ints("k", 1, (int64_t[]){5})}, 2);
    check_fails("K = 5 exceeds axis 0 of size 4");
}
END_TEST

/* ---- Constant, resampling, signal ops ---------------------------------------- */

START_TEST(constant_attribute_kinds)
{
    int32_t a = node("Constant", "a", 0, NULL);
    attr_ints("value_ints", 3, (int64_t[]){4, 5, 6});
    int32_t b = node("Constant", "b", 0, NULL);
    attr_int("value_int", 7);
    int32_t c = node("Constant", "c", 0, NULL);
    attr_floats("value_floats", 2, (float[]){0.5f, 1.5f});
    int32_t d = node("Constant", "d", 0, NULL);
    mp_tensor *t = mp_tensor_new(g->arena, MP_INT32, 2, (int64_t[]){1, 2});
    attr_tensor("value", t);
    infer_ok();
    check_ints(a, 3, (int64_t[]){4, 5, 6});
    check_type(b, "int64[]");
    check_ints(b, 1, (int64_t[]){7});
    check_type(c, "float32[2]");
    check_type(d, "int32[1,2]");
}
END_TEST

START_TEST(constant_needs_exactly_one_value)
{
    node("Constant", "a", 0, NULL);
    attr_int("value_int", 7);
    attr_ints("value_ints", 1, (int64_t[]){7});
    check_fails("exactly one");
}
END_TEST

START_TEST(resize_and_upsample)
{
    opset(19);
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){-1, 3, 20, 30});
    int32_t a = node("Resize", "a", 3,
                     (int32_t[]){x, -1, konst("sc", MP_FLOAT, 1, (int64_t[]){4}, (double[]){1, 1, 0.5, 2.5})});
    int32_t b = node("Resize", "b", 4, (int32_t[]){x, -1, -1, ints("sz", 2, (int64_t[]){10, 10})});
    attr_ints("axes", 2, (int64_t[]){2, 3});
    attr_str("keep_aspect_ratio_policy", "not_larger");
    int32_t s = node("Shape", "s", 1, &x);
    int32_t h = node("Slice", "h", 3, (int32_t[]){s, ints("s0", 1, (int64_t[]){0}), ints("s2", 1, (int64_t[]){2})});
    int32_t sizes = node("Concat", "sizes", 2, (int32_t[]){h, ints("hw", 2, (int64_t[]){40, 60})});
    attr_int("axis", 0);
    int32_t c = node("Resize", "c", 4, (int32_t[]){x, -1, -1, sizes});
    int32_t u = node("Upsample", "u", 1, &x);
    attr_floats("scales", 4, (float[]){1, 1, 2, 2});
    infer_ok();
    check_type(a, "float32[batch,3,10,75]");
    check_type(b, "float32[batch,3,7,10]"); /* scale min(10/20, 10/30) */
    check_type(c, "float32[batch,3,40,60]");
    check_type(u, "float32[batch,3,40,60]");
}
END_TEST

START_TEST(resize_rejects_scales_and_sizes_together)
{
    int32_t x = input("x", MP_FLOAT, 2, (int64_t[]){2, 2});
    node("Resize", "a", 4,
         (int32_t[]){x, -1, konst("sc", MP_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2}),
                     ints("sz", 2, (int64_t[]){2, 4})});
    check_fails("only one");
}
END_TEST

START_TEST(signal_ops)
{
    opset(17);
    int32_t sig = input("sig", MP_FLOAT, 3, (int64_t[]){-1, 128, 1});
    int32_t st = node("STFT", "st", 4, (int32_t[]){sig, scalar("step", 8), -1, scalar("fl", 16)});
    int32_t w = node("HannWindow", "w", 1, (int32_t[]){konst("n", MP_INT32, 0, NULL, (double[]){10})});
    attr_int("output_datatype", MP_DOUBLE);
    int32_t m = node("MelWeightMatrix", "m", 5,
                     (int32_t[]){scalar("bins", 8), scalar("dl", 16), scalar("sr", 8192),
                                 konst("lo", MP_FLOAT, 0, NULL, (double[]){0}),
                                 konst("hi", MP_FLOAT, 0, NULL, (double[]){4096})});
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){-1, 10, 6, 1});
    int32_t d = node("DFT", "d", 1, &x);
    attr_int("onesided", 1); /* DFT-17: axis 1 by default */
    int32_t c = input("c", MP_FLOAT, 4, (int64_t[]){-1, 6, 10, 2});
    int32_t i = node("DFT", "i", 1, &c);
    attr_int("inverse", 1);
    attr_int("onesided", 1);
    infer_ok();
    check_type(st, "float32[batch,15,9,2]");
    check_type(w, "float64[10]");
    check_type(m, "float32[9,8]");
    check_type(d, "float32[batch,6,6,2]");
    check_type(i, "float32[batch,10,10,1]");
}
END_TEST

START_TEST(dft20_takes_axis_as_input)
{
    opset(20);
    int32_t x = input("x", MP_FLOAT, 4, (int64_t[]){1, 10, 8, 1});
    int32_t d = node("DFT", "d", 3, (int32_t[]){x, -1, scalar("ax", 2)});
    attr_int("onesided", 1);
    int32_t e = node("DFT", "e", 2, (int32_t[]){x, scalar("len", 12)}); /* axis -2 */
    infer_ok();
    check_type(d, "float32[1,10,5,2]");
    check_type(e, "float32[1,10,12,2]");
}
END_TEST

START_TEST(col2im_and_center_crop_pad)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){-1, 5 * 4, 25});
    int32_t c =
        node("Col2Im", "c", 3, (int32_t[]){x, ints("img", 2, (int64_t[]){5, 5}), ints("blk", 2, (int64_t[]){2, 2})});
    attr_ints("pads", 4, (int64_t[]){1, 1, 0, 0});
    int32_t y = input("y", MP_FLOAT, 3, (int64_t[]){-1, 20, 10});
    int32_t p = node("CenterCropPad", "p", 2, (int32_t[]){y, ints("sh", 2, (int64_t[]){8, 12})});
    attr_ints("axes", 2, (int64_t[]){-2, -1});
    infer_ok();
    check_type(c, "float32[batch,5,5,5]");
    check_type(p, "float32[batch,8,12]");
}
END_TEST

START_TEST(col2im_checks_the_block_count)
{
    int32_t x = input("x", MP_FLOAT, 3, (int64_t[]){1, 4, 10});
    node("Col2Im", "c", 3, (int32_t[]){x, ints("img", 2, (int64_t[]){5, 5}), ints("blk", 2, (int64_t[]){2, 2})});
    check_fails("10 blocks but the image holds 16");
}
END_TEST

/* ---- driver ----------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("shape_tensor");
    TCase *tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, torch_chain_keeps_batch_symbolic);
    tcase_add_test(tc, torch_chain_folds_once_batch_is_bound);
    tcase_add_test(tc, constant_of_shape_gives_weight_shapes);
    tcase_add_test(tc, constant_of_shape_takes_symbolic_shape);
    tcase_add_test(tc, shape_start_end_and_size);
    tcase_add_test(tc, range_lengths_and_values);
    tcase_add_test(tc, range_rejects_zero_delta);
    tcase_add_test(tc, reshape_names_the_sizes_it_cannot_match);
    tcase_add_test(tc, reshape_rejects_two_minus_ones);
    tcase_add_test(tc, reshape_checks_counts_across_symbols);
    tcase_add_test(tc, reshape_zero_copies_unless_allowzero);
    tcase_add_test(tc, reshape_folds_known_data_and_reshape1_attr);
    tcase_add_test(tc, flatten_negative_axis_counts_from_the_end);
    tcase_add_test(tc, squeeze_and_unsqueeze_by_attribute_and_input);
    tcase_add_test(tc, squeeze_rejects_a_dim_not_one);
    tcase_add_test(tc, transpose_moves_dims_and_values);
    tcase_add_test(tc, transpose_rejects_a_bad_perm);
    tcase_add_test(tc, concat_sums_the_axis_and_checks_the_rest);
    tcase_add_test(tc, concat_rejects_mismatched_dims);
    tcase_add_test(tc, split_forms_of_every_opset);
    tcase_add_test(tc, split_rejects_parts_that_do_not_sum);
    tcase_add_test(tc, slice_clamps_steps_and_folds);
    tcase_add_test(tc, slice_of_a_symbolic_shape_vector);
    tcase_add_test(tc, expand_and_tile);
    tcase_add_test(tc, expand_rejects_incompatible_dims);
    tcase_add_test(tc, gather_shapes_and_values);
    tcase_add_test(tc, gather_rejects_an_index_out_of_range);
    tcase_add_test(tc, scatter_folds_without_reduction);
    tcase_add_test(tc, pad_all_opsets_and_modes);
    tcase_add_test(tc, pad_rejects_a_negative_result);
    tcase_add_test(tc, data_dependent_outputs_are_computed_when_known);
    tcase_add_test(tc, unique_sorted_rows_with_axis);
    tcase_add_test(tc, topk_onehot_and_friends);
    tcase_add_test(tc, topk_rejects_k_beyond_the_axis);
    tcase_add_test(tc, constant_attribute_kinds);
    tcase_add_test(tc, constant_needs_exactly_one_value);
    tcase_add_test(tc, resize_and_upsample);
    tcase_add_test(tc, resize_rejects_scales_and_sizes_together);
    tcase_add_test(tc, signal_ops);
    tcase_add_test(tc, dft20_takes_axis_as_input);
    tcase_add_test(tc, col2im_and_center_crop_pad);
    tcase_add_test(tc, col2im_checks_the_block_count);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
