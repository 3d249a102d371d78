/* test_shape_nn.c - shape rules of the neural-network ops (ir/ops/nn.def):
 * tiny graphs built with the IR API, inferred, and their shapes, symbols and
 * error messages checked. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h"
#include "ir/ir.h"

/* ---- graph-building helpers ------------------------------------------------ */

/* Adds value `name` typed t with dims written "N,3,224,224": a number is a
 * known dim, "?" unknown, any other word a symbol; rank -1 leaves the rank unknown. */
static int32_t val(mp_graph *g, const char *name, mp_dtype t, int rank, const char *dims)
{
    int32_t id = mp_graph_value(g, name);
    mp_dim d[MP_MAX_RANK];
    char buf[256];
    snprintf(buf, sizeof buf, "%s", dims ? dims : "");
    char *save = NULL, *tok = strtok_r(buf, ",", &save);
    for (int i = 0; i < rank; i++, tok = strtok_r(NULL, ",", &save)) {
        ck_assert_ptr_nonnull(tok);
        if (!strcmp(tok, "?"))
            d[i] = MP_DIM_UNKNOWN;
        else if (tok[0] >= '0' && tok[0] <= '9')
            d[i] = mp_dim_of(atoll(tok));
        else
            d[i] = mp_sym_dim(g, tok);
    }
    mp_value_set(g, id, t, rank, d);
    g->values[id].flags |= MP_VAL_INPUT;
    return id;
}

/* Gives value `name` known int64 contents. */
static void konst_i64(mp_graph *g, const char *name, int rank, const int64_t *dims, const int64_t *data)
{
    mp_value *v = &g->values[mp_graph_find(g, name)];
    mp_tensor *t = mp_tensor_new(g->arena, MP_INT64, rank, dims);
    for (int64_t i = 0; i < t->numel; i++) mp_tensor_set_i64(t, i, data[i]);
    v->konst = t;
}

static void konst_f32(mp_graph *g, const char *name, int rank, const int64_t *dims, const double *data)
{
    mp_value *v = &g->values[mp_graph_find(g, name)];
    mp_tensor *t = mp_tensor_new(g->arena, MP_FLOAT, rank, dims);
    for (int64_t i = 0; i < t->numel; i++) mp_tensor_set_f64(t, i, data[i]);
    v->konst = t;
}

/* Splits "a,,b" into value ids (empty = omitted input, -1). */
static int ids(mp_graph *g, const char *names, int32_t *out)
{
    int k = 0;
    const char *p = names;
    while (*p || (k && p[-1] == ',')) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        out[k++] = len ? mp_graph_value(g, name) : -1;
        if (!e) break;
        p = e + 1;
    }
    return k;
}

/* Adds a node with room for attributes. */
static mp_node *node(mp_graph *g, const char *op, const char *domain, const char *ins, const char *outs)
{
    int32_t in[32], out[32];
    int nin = ids(g, ins, in), nout = ids(g, outs, out);
    int32_t id = mp_graph_add_node(g, op, op, domain, nin, in, nout, out);
    mp_node *n = &g->nodes[id];
    n->attrs = mp_arena_alloc(g->arena, 16 * sizeof *n->attrs);
    n->nattrs = 0;
    return n;
}

static mp_attr *attr(mp_graph *g, mp_node *n, const char *name, mp_attr_type t)
{
    mp_attr *a = &n->attrs[n->nattrs++];
    a->name = mp_arena_strdup(g->arena, name);
    a->type = t;
    return a;
}

static void attr_i(mp_graph *g, mp_node *n, const char *name, int64_t v) { attr(g, n, name, MP_ATTR_INT)->i = v; }
static void attr_f(mp_graph *g, mp_node *n, const char *name, float v) { attr(g, n, name, MP_ATTR_FLOAT)->f = v; }

static void attr_s(mp_graph *g, mp_node *n, const char *name, const char *s)
{
    mp_attr *a = attr(g, n, name, MP_ATTR_STRING);
    a->s = mp_arena_strdup(g->arena, s);
    a->slen = strlen(s);
}

static void attr_ints(mp_graph *g, mp_node *n, const char *name, int count, ...)
{
    mp_attr *a = attr(g, n, name, MP_ATTR_INTS);
    a->n = count;
    a->ints = mp_arena_alloc(g->arena, (size_t)(count + 1) * sizeof *a->ints);
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++) a->ints[i] = va_arg(ap, int);
    va_end(ap);
}

static void attr_strings(mp_graph *g, mp_node *n, const char *name, int count, const char **s)
{
    mp_attr *a = attr(g, n, name, MP_ATTR_STRINGS);
    a->n = count;
    a->strings = mp_arena_alloc(g->arena, (size_t)(count + 1) * sizeof *a->strings);
    for (int i = 0; i < count; i++) a->strings[i] = mp_arena_strdup(g->arena, s[i]);
}

static void set_opset(mp_graph *g, const char *domain, int64_t v)
{
    if (!g->opsets) g->opsets = mp_arena_alloc(g->arena, 8 * sizeof *g->opsets);
    g->opsets[g->nopsets].domain = mp_arena_strdup(g->arena, domain);
    g->opsets[g->nopsets++].version = v;
}

static mp_err err;

static void infer_ok(mp_graph *g)
{
    err.msg[0] = 0;
    int rc = mp_graph_link(g, &err) || mp_infer(g, &err);
    if (rc) ck_abort_msg("inference failed: %s", err.msg);
}

/* Inference must fail with a message containing every given fragment. */
static void infer_fails(mp_graph *g, const char *a, const char *b)
{
    err.msg[0] = 0;
    int rc = mp_graph_link(g, &err) || mp_infer(g, &err);
    ck_assert_msg(rc != 0, "inference should have failed");
    ck_assert_msg(strstr(err.msg, a), "message '%s' lacks '%s'", err.msg, a);
    if (b) ck_assert_msg(strstr(err.msg, b), "message '%s' lacks '%s'", err.msg, b);
}

/* "float32[N,64,112,112]" for the value named `name`. */
static const char *type_of(mp_graph *g, const char *name)
{
    static char buf[256];
    int32_t id = mp_graph_find(g, name);
    ck_assert_int_ge(id, 0);
    return mp_value_type_str(g, &g->values[id], buf, sizeof buf);
}

#define ck_type(g, name, want) ck_assert_str_eq(type_of(g, name), want)

/* ---- convolutions and pools ----------------------------------------------------- */

START_TEST(conv_keeps_symbolic_batch)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "N,3,224,224");
    val(g, "w", MP_FLOAT, 4, "64,3,7,7");
    val(g, "b", MP_FLOAT, 1, "64");
    mp_node *n = node(g, "Conv", "", "x,w,b", "y");
    attr_ints(g, n, "strides", 2, 2, 2);
    attr_ints(g, n, "pads", 4, 3, 3, 3, 3);
    infer_ok(g);
    ck_type(g, "y", "float32[N,64,112,112]");
    mp_graph_free(g);
}
END_TEST

START_TEST(conv_stride1_keeps_symbolic_spatial)
{
    /* SAME_UPPER, or pads that exactly offset the kernel, keep H and W symbolic */
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT16, 4, "N,3,H,W");
    val(g, "w", MP_FLOAT16, 4, "8,3,3,3");
    attr_s(g, node(g, "Conv", "", "x,w", "y"), "auto_pad", "SAME_UPPER");
    attr_ints(g, node(g, "Conv", "", "x,w", "z"), "pads", 4, 1, 1, 1, 1);
    node(g, "Conv", "", "x,w", "v"); /* no padding: H - 2 is not a symbol */
    infer_ok(g);
    ck_type(g, "y", "float16[N,8,H,W]");
    ck_type(g, "z", "float16[N,8,H,W]");
    ck_type(g, "v", "float16[N,8,?,?]");
    mp_graph_free(g);
}
END_TEST

START_TEST(conv_auto_pad_and_dilation)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,1,7,5");
    val(g, "w", MP_FLOAT, 4, "1,1,3,3");
    mp_node *n = node(g, "Conv", "", "x,w", "same");
    attr_s(g, n, "auto_pad", "SAME_LOWER");
    attr_ints(g, n, "strides", 2, 2, 2);
    n = node(g, "Conv", "", "x,w", "valid");
    attr_s(g, n, "auto_pad", "VALID");
    attr_ints(g, n, "strides", 2, 2, 2);
    attr_ints(g, node(g, "Conv", "", "x,w", "dil"), "dilations", 2, 2, 2);
    infer_ok(g);
    ck_type(g, "same", "float32[1,1,4,3]");  /* ceil(7/2), ceil(5/2) */
    ck_type(g, "valid", "float32[1,1,3,2]"); /* (7-3)/2+1, (5-3)/2+1 */
    ck_type(g, "dil", "float32[1,1,3,1]");   /* kernel spans 5 */
    mp_graph_free(g);
}
END_TEST

START_TEST(conv_groups_and_depthwise)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "2,8,5,5");
    val(g, "w", MP_FLOAT, 4, "8,1,3,3");
    attr_i(g, node(g, "Conv", "", "x,w", "y"), "group", 8);
    infer_ok(g);
    ck_type(g, "y", "float32[2,8,3,3]");
    mp_graph_free(g);
}
END_TEST

START_TEST(conv_rejects_channel_mismatch)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,3,8,8");
    val(g, "w", MP_FLOAT, 4, "4,2,3,3");
    node(g, "Conv", "", "x,w", "y");
    infer_fails(g, "3 channels", "expects 2");
    mp_graph_free(g);
}
END_TEST

START_TEST(conv_rejects_bad_attributes)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,3,8,8");
    val(g, "w", MP_FLOAT, 4, "4,3,3,3");
    attr_ints(g, node(g, "Conv", "", "x,w", "y"), "strides", 3, 1, 1, 1);
    infer_fails(g, "'strides' has 3 values", "expected 2");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,3,8,8");
    val(g, "w", MP_FLOAT, 4, "4,3,3,3");
    attr_s(g, node(g, "Conv", "", "x,w", "y"), "auto_pad", "SAME");
    infer_fails(g, "auto_pad 'SAME'", NULL);
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,3,2,2");
    val(g, "w", MP_FLOAT, 4, "4,3,3,3");
    node(g, "Conv", "", "x,w", "y");
    infer_fails(g, "padded input is 2", NULL); /* kernel larger than the input */
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,3,8,8");
    val(g, "w", MP_FLOAT, 4, "4,3,3,3");
    attr_ints(g, node(g, "Conv", "", "x,w", "y"), "kernel_shape", 2, 3, 5);
    infer_fails(g, "kernel_shape[1] is 5", "W's spatial dim is 3");
    mp_graph_free(g);
}
END_TEST

START_TEST(conv_unknown_rank_input)
{
    /* X's rank is unknown: the rank and M still follow from W */
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, -1, NULL);
    val(g, "w", MP_FLOAT, 4, "16,3,3,3");
    node(g, "Conv", "", "x,w", "y");
    val(g, "a", MP_FLOAT, -1, NULL);
    node(g, "Conv", "", "a,a", "z");
    infer_ok(g);
    ck_type(g, "y", "float32[?,16,?,?]");
    ck_type(g, "z", "float32[...]");
    mp_graph_free(g);
}
END_TEST

START_TEST(conv_transpose_shapes)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "N,4,3,3");
    val(g, "w", MP_FLOAT, 4, "4,3,3,3");
    mp_node *n = node(g, "ConvTranspose", "", "x,w", "y");
    attr_ints(g, n, "strides", 2, 3, 2);
    attr_ints(g, n, "output_padding", 2, 1, 1);
    attr_ints(g, n, "pads", 4, 0, 0, 1, 1);
    attr_i(g, n, "group", 2);
    attr_ints(g, node(g, "ConvTranspose", "", "x,w", "os"), "output_shape", 2, 10, 8);
    n = node(g, "ConvTranspose", "", "x,w", "same");
    attr_s(g, n, "auto_pad", "SAME_UPPER");
    attr_ints(g, n, "strides", 2, 2, 2);
    infer_ok(g);
    /* 3*(3-1) + 1 + 3 - 1 = 9 and 2*(3-1) + 1 + 3 - 1 = 7; channels 3 * group 2 */
    ck_type(g, "y", "float32[N,6,9,7]");
    ck_type(g, "os", "float32[N,3,10,8]");
    ck_type(g, "same", "float32[N,3,6,6]");
    mp_graph_free(g);
}
END_TEST

START_TEST(pool_ceil_mode_and_indices)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "N,2,5,4");
    mp_node *n = node(g, "MaxPool", "", "x", "y,idx");
    attr_ints(g, n, "kernel_shape", 2, 2, 2);
    attr_ints(g, n, "strides", 2, 2, 2);
    attr_ints(g, n, "pads", 4, 0, 0, 0, 1);
    attr_i(g, n, "ceil_mode", 1);
    n = node(g, "AveragePool", "", "x", "avg");
    attr_ints(g, n, "kernel_shape", 2, 3, 3);
    attr_ints(g, n, "strides", 2, 2, 2);
    attr_s(g, n, "auto_pad", "SAME_LOWER");
    node(g, "GlobalMaxPool", "", "x", "gmax");
    infer_ok(g);
    /* H: ceil(3/2)+1 = 3; W: ceil(3/2)+1 = 3 but the 3rd window would start in the end pad: 2 */
    ck_type(g, "y", "float32[N,2,3,2]");
    ck_type(g, "idx", "int64[N,2,3,2]");
    ck_type(g, "avg", "float32[N,2,3,2]");
    ck_type(g, "gmax", "float32[N,2,1,1]");
    mp_graph_free(g);
}
END_TEST

START_TEST(pool_requires_kernel_shape)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,2,5,4");
    node(g, "AveragePool", "", "x", "y");
    infer_fails(g, "'kernel_shape' is required", NULL);
    mp_graph_free(g);
}
END_TEST

START_TEST(maxunpool_and_roi)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,3,2,2");
    val(g, "i", MP_INT64, 4, "1,3,2,2");
    val(g, "shape", MP_INT64, 1, "4");
    konst_i64(g, "shape", 1, (int64_t[]){4}, (int64_t[]){1, 3, 5, 5});
    mp_node *n = node(g, "MaxUnpool", "", "x,i", "y");
    attr_ints(g, n, "kernel_shape", 2, 2, 2);
    attr_ints(g, n, "strides", 2, 2, 2);
    n = node(g, "MaxUnpool", "", "x,i,shape", "z");
    attr_ints(g, n, "kernel_shape", 2, 2, 2);
    val(g, "rois", MP_FLOAT, 2, "R,4");
    val(g, "bi", MP_INT64, 1, "R");
    n = node(g, "RoiAlign", "", "x,rois,bi", "ra");
    attr_i(g, n, "output_height", 5);
    attr_i(g, n, "output_width", 7);
    infer_ok(g);
    ck_type(g, "y", "float32[1,3,4,4]");
    ck_type(g, "z", "float32[1,3,5,5]");
    ck_type(g, "ra", "float32[R,3,5,7]");
    mp_graph_free(g);
}
END_TEST

/* ---- matrix products ------------------------------------------------------------- */

START_TEST(matmul_promotes_1d_and_broadcasts)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "v", MP_FLOAT, 1, "4");
    val(g, "a", MP_FLOAT, 3, "B,3,4");
    val(g, "b", MP_FLOAT, 4, "N,1,4,6");
    val(g, "c", MP_FLOAT, 3, "5,6,2");
    node(g, "MatMul", "", "v,v", "dot");
    node(g, "MatMul", "", "a,v", "av");
    node(g, "MatMul", "", "v,b", "vb");
    node(g, "MatMul", "", "b,c", "bc");
    infer_ok(g);
    ck_type(g, "dot", "float32[]");
    ck_type(g, "av", "float32[B,3]");
    ck_type(g, "vb", "float32[N,1,6]");
    ck_type(g, "bc", "float32[N,5,4,2]");
    mp_graph_free(g);
}
END_TEST

START_TEST(matmul_rejects_inner_mismatch)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "a", MP_FLOAT, 2, "3,4");
    val(g, "b", MP_FLOAT, 2, "5,6");
    node(g, "MatMul", "", "a,b", "y");
    infer_fails(g, "K=4", "K=5");
    mp_graph_free(g);
}
END_TEST

START_TEST(matmul_unknown_rank_and_integer)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "a", MP_INT8, -1, NULL);
    val(g, "b", MP_UINT8, 2, "4,6");
    val(g, "c", MP_UINT8, 2, "3,4");
    node(g, "MatMul", "", "a,b", "y");
    node(g, "MatMulInteger", "", "c,b", "z");
    infer_ok(g);
    ck_type(g, "y", "int8[...]");
    ck_type(g, "z", "int32[3,6]");
    mp_graph_free(g);
}
END_TEST

START_TEST(gemm_transposes_and_checks_c)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "a", MP_FLOAT, 2, "4,M");
    val(g, "b", MP_FLOAT, 2, "7,4");
    val(g, "c", MP_FLOAT, 1, "7");
    mp_node *n = node(g, "Gemm", "", "a,b,c", "y");
    attr_i(g, n, "transA", 1);
    attr_i(g, n, "transB", 1);
    infer_ok(g);
    ck_type(g, "y", "float32[M,7]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "a", MP_FLOAT, 2, "3,4");
    val(g, "b", MP_FLOAT, 2, "4,7");
    val(g, "c", MP_FLOAT, 1, "5");
    node(g, "Gemm", "", "a,b,c", "y");
    infer_fails(g, "C dim 0 is 5", NULL);
    mp_graph_free(g);
}
END_TEST

START_TEST(einsum_explicit_implicit_ellipsis)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "a", MP_FLOAT, 3, "B,3,4");
    val(g, "b", MP_FLOAT, 3, "B,4,5");
    val(g, "m", MP_FLOAT, 2, "3,3");
    val(g, "e", MP_FLOAT, 4, "2,B,3,4");
    attr_s(g, node(g, "Einsum", "", "a,b", "bmm"), "equation", "bij, bjk -> bik");
    attr_s(g, node(g, "Einsum", "", "m", "trace"), "equation", "ii");
    attr_s(g, node(g, "Einsum", "", "a,b", "imp"), "equation", "bij,bjk");
    attr_s(g, node(g, "Einsum", "", "e", "tr"), "equation", "...ij->...ji");
    infer_ok(g);
    ck_type(g, "bmm", "float32[B,3,5]");
    ck_type(g, "trace", "float32[]");
    ck_type(g, "imp", "float32[3,5]"); /* b is summed: it appears twice */
    ck_type(g, "tr", "float32[2,B,4,3]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "a", MP_FLOAT, 2, "3,4");
    val(g, "b", MP_FLOAT, 2, "5,6");
    attr_s(g, node(g, "Einsum", "", "a,b", "y"), "equation", "ij,jk->ik");
    infer_fails(g, "label 'j' is 4", "5");
    mp_graph_free(g);
}
END_TEST

/* ---- normalizations, dropout ------------------------------------------------------- */

START_TEST(batchnorm_training_outputs)
{
    mp_graph *g = mp_graph_new(NULL);
    set_opset(g, "", 15);
    val(g, "x", MP_FLOAT16, 4, "N,3,8,8");
    for (int i = 0; i < 4; i++) val(g, (const char *[]){"s", "b", "m", "v"}[i], MP_FLOAT, 1, "3");
    attr_i(g, node(g, "BatchNormalization", "", "x,s,b,m,v", "y,rm,rv"), "training_mode", 1);
    infer_ok(g);
    ck_type(g, "y", "float16[N,3,8,8]");
    ck_type(g, "rm", "float32[3]");
    ck_type(g, "rv", "float32[3]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "1,3,8,8");
    val(g, "s", MP_FLOAT, 1, "4");
    node(g, "BatchNormalization", "", "x,s,s,s,s", "y");
    infer_fails(g, "scale length is 4", "expected 3");
    mp_graph_free(g);
}
END_TEST

START_TEST(layernorm_stats_follow_axis_and_stash_type)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT16, 3, "B,S,64");
    val(g, "s", MP_FLOAT16, 2, "S,64");
    mp_node *n = node(g, "LayerNormalization", "", "x,s", "y,mean,inv");
    attr_i(g, n, "axis", 1);
    node(g, "RMSNormalization", "", "x,s", "r");
    infer_ok(g);
    ck_type(g, "y", "float16[B,S,64]");
    ck_type(g, "mean", "float32[B,1,1]");
    ck_type(g, "inv", "float32[B,1,1]");
    ck_type(g, "r", "float16[B,S,64]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 2, "2,3");
    attr_i(g, node(g, "LayerNormalization", "", "x,x", "y"), "axis", 2);
    infer_fails(g, "axis 2 is out of range", NULL);
    mp_graph_free(g);
}
END_TEST

START_TEST(dropout_mask_type_by_opset)
{
    mp_graph *g = mp_graph_new(NULL);
    set_opset(g, "", 13);
    val(g, "x", MP_FLOAT, 2, "N,10");
    val(g, "r", MP_FLOAT, 0, "");
    val(g, "t", MP_BOOL, 0, "");
    node(g, "Dropout", "", "x,r,t", "y,mask");
    infer_ok(g);
    ck_type(g, "y", "float32[N,10]");
    ck_type(g, "mask", "bool[N,10]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    set_opset(g, "", 7);
    val(g, "x", MP_FLOAT, 2, "N,10");
    node(g, "Dropout", "", "x", "y,mask");
    infer_ok(g);
    ck_type(g, "mask", "float32[N,10]");
    mp_graph_free(g);
}
END_TEST

/* ---- recurrences --------------------------------------------------------------------- */

START_TEST(lstm_bidirectional_and_layout)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 3, "S,N,10");
    val(g, "w", MP_FLOAT, 3, "2,80,10");
    val(g, "r", MP_FLOAT, 3, "2,80,20");
    attr_s(g, node(g, "LSTM", "", "x,w,r", "y,yh,yc"), "direction", "bidirectional");
    val(g, "xb", MP_FLOAT, 3, "N,S,10");
    val(g, "gw", MP_FLOAT, 3, "1,60,10");
    val(g, "gr", MP_FLOAT, 3, "1,60,20");
    mp_node *n = node(g, "GRU", "", "xb,gw,gr", "gy,gyh");
    attr_i(g, n, "layout", 1);
    attr_i(g, n, "hidden_size", 20);
    infer_ok(g);
    ck_type(g, "y", "float32[S,2,N,20]");
    ck_type(g, "yh", "float32[2,N,20]");
    ck_type(g, "yc", "float32[2,N,20]");
    ck_type(g, "gy", "float32[N,S,1,20]");
    ck_type(g, "gyh", "float32[N,1,20]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 3, "S,N,10");
    val(g, "w", MP_FLOAT, 3, "1,80,10");
    val(g, "r", MP_FLOAT, 3, "1,80,20");
    attr_i(g, node(g, "LSTM", "", "x,w,r", "y"), "hidden_size", 16);
    infer_fails(g, "hidden size is 20", "expected 16");
    mp_graph_free(g);
}
END_TEST

/* ---- quantization, losses, grids, NMS ---------------------------------------------------- */

START_TEST(quantize_output_types)
{
    mp_graph *g = mp_graph_new(NULL);
    set_opset(g, "", 21);
    val(g, "x", MP_FLOAT, 2, "N,4");
    val(g, "s", MP_FLOAT16, 0, "");
    val(g, "z", MP_INT8, 0, "");
    node(g, "QuantizeLinear", "", "x,s,z", "q");
    node(g, "QuantizeLinear", "", "x,s", "u");
    attr_i(g, node(g, "QuantizeLinear", "", "x,s", "e4"), "output_dtype", MP_FLOAT8E4M3FN);
    node(g, "DequantizeLinear", "", "q,s,z", "d");
    node(g, "DynamicQuantizeLinear", "", "x", "dq,dqs,dqz");
    infer_ok(g);
    ck_type(g, "q", "int8[N,4]");
    ck_type(g, "u", "uint8[N,4]");
    ck_type(g, "e4", "float8e4m3fn[N,4]");
    ck_type(g, "d", "float16[N,4]");
    ck_type(g, "dq", "uint8[N,4]");
    ck_type(g, "dqs", "float32[]");
    ck_type(g, "dqz", "uint8[]");
    mp_graph_free(g);
}
END_TEST

START_TEST(losses_by_reduction)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 3, "N,5,7");
    val(g, "t", MP_INT64, 2, "N,7");
    attr_s(g, node(g, "SoftmaxCrossEntropyLoss", "", "x,t", "none,logp"), "reduction", "none");
    node(g, "SoftmaxCrossEntropyLoss", "", "x,t", "mean");
    attr_s(g, node(g, "NegativeLogLikelihoodLoss", "", "x,t", "sum"), "reduction", "sum");
    infer_ok(g);
    ck_type(g, "none", "float32[N,7]");
    ck_type(g, "logp", "float32[N,5,7]");
    ck_type(g, "mean", "float32[]");
    ck_type(g, "sum", "float32[]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 3, "2,5,7");
    val(g, "t", MP_INT64, 2, "2,6");
    node(g, "NegativeLogLikelihoodLoss", "", "x,t", "y");
    infer_fails(g, "is 6", "expected 7");
    mp_graph_free(g);
}
END_TEST

START_TEST(grids)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "x", MP_FLOAT, 4, "N,3,32,32");
    val(g, "grid", MP_FLOAT, 4, "N,8,9,2");
    node(g, "GridSample", "", "x,grid", "y");
    val(g, "theta", MP_FLOAT, 3, "2,3,4");
    val(g, "size", MP_INT64, 1, "5");
    konst_i64(g, "size", 1, (int64_t[]){5}, (int64_t[]){2, 1, 4, 5, 6});
    node(g, "AffineGrid", "", "theta,size", "ag");
    val(g, "size2", MP_INT64, 1, "4"); /* contents unknown: only the rank follows */
    node(g, "AffineGrid", "", "theta,size2", "ag2");
    infer_ok(g);
    ck_type(g, "y", "float32[N,3,8,9]");
    ck_type(g, "ag", "float32[2,4,5,6,3]");
    ck_type(g, "ag2", "float32[2,?,?,2]");
    mp_graph_free(g);
}
END_TEST

START_TEST(nms_counts_known_boxes)
{
    /* two overlapping boxes and one apart: IoU 0.81 > 0.5 drops the second */
    mp_graph *g = mp_graph_new(NULL);
    val(g, "boxes", MP_FLOAT, 3, "1,3,4");
    val(g, "scores", MP_FLOAT, 3, "1,1,3");
    val(g, "max", MP_INT64, 1, "1");
    val(g, "iou", MP_FLOAT, 1, "1");
    konst_f32(g, "boxes", 3, (int64_t[]){1, 3, 4}, (double[]){0, 0, 1, 1, 0, 0, 0.9, 0.9, 5, 5, 6, 6});
    konst_f32(g, "scores", 3, (int64_t[]){1, 1, 3}, (double[]){0.9, 0.8, 0.7});
    konst_i64(g, "max", 1, (int64_t[]){1}, (int64_t[]){10});
    konst_f32(g, "iou", 1, (int64_t[]){1}, (double[]){0.5});
    node(g, "NonMaxSuppression", "", "boxes,scores,max,iou", "sel");
    val(g, "b2", MP_FLOAT, 3, "B,S,4");
    val(g, "s2", MP_FLOAT, 3, "B,2,S");
    node(g, "NonMaxSuppression", "", "b2,s2", "open");
    infer_ok(g);
    ck_type(g, "sel", "int64[2,3]");
    const mp_tensor *t = g->values[mp_graph_find(g, "sel")].konst;
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(mp_tensor_get_i64(t, 2), 0); /* box 0, then box 2 */
    ck_assert_int_eq(mp_tensor_get_i64(t, 5), 2);
    ck_type(g, "open", "int64[?,3]");
    mp_graph_free(g);
}
END_TEST

/* ---- attention ------------------------------------------------------------------------------ */

START_TEST(attention_3d_with_past)
{
    mp_graph *g = mp_graph_new(NULL);
    set_opset(g, "", 23);
    val(g, "q", MP_FLOAT, 3, "B,4,24");
    val(g, "k", MP_FLOAT, 3, "B,6,24");
    val(g, "v", MP_FLOAT, 3, "B,6,30");
    val(g, "pk", MP_FLOAT, 4, "B,3,12,8");
    val(g, "pv", MP_FLOAT, 4, "B,3,12,10");
    mp_node *n = node(g, "Attention", "", "q,k,v,,pk,pv", "y,prk,prv,qk");
    attr_i(g, n, "q_num_heads", 3);
    attr_i(g, n, "kv_num_heads", 3);
    infer_ok(g);
    ck_type(g, "y", "float32[B,4,30]");
    ck_type(g, "prk", "float32[B,3,18,8]");
    ck_type(g, "prv", "float32[B,3,18,10]");
    ck_type(g, "qk", "float32[B,3,4,18]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "q", MP_FLOAT, 4, "1,4,2,8");
    val(g, "k", MP_FLOAT, 4, "1,3,2,8");
    node(g, "Attention", "", "q,k,k", "y");
    infer_fails(g, "not a multiple", NULL);
    mp_graph_free(g);
}
END_TEST

START_TEST(linear_attention_and_causal_conv)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "q", MP_FLOAT, 3, "B,T,64");
    val(g, "k", MP_FLOAT, 3, "B,T,32");
    val(g, "v", MP_FLOAT, 3, "B,T,40");
    mp_node *n = node(g, "LinearAttention", "", "q,k,v", "o,st");
    attr_i(g, n, "q_num_heads", 8);
    attr_i(g, n, "kv_num_heads", 4);
    val(g, "x", MP_FLOAT, 3, "B,4,T");
    val(g, "w", MP_FLOAT, 3, "4,1,5");
    node(g, "CausalConvWithState", "", "x,w", "cy,cst");
    attr_f(g, node(g, "SwiGLU", "", "q,q", "sw"), "alpha", 0.5f);
    infer_ok(g);
    ck_type(g, "o", "float32[B,T,80]"); /* 8 query heads x d_v 10 */
    ck_type(g, "st", "float32[B,4,8,10]");
    ck_type(g, "cy", "float32[B,4,T]");
    ck_type(g, "cst", "float32[B,4,4]");
    ck_type(g, "sw", "float32[B,T,64]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "a", MP_FLOAT, 2, "2,4");
    val(g, "b", MP_FLOAT, 2, "2,1");
    node(g, "SwiGLU", "", "a,b", "y"); /* SwiGLU does not broadcast */
    infer_fails(g, "is 1", "expected 4");
    mp_graph_free(g);
}
END_TEST

/* ---- training -------------------------------------------------------------------------------- */

START_TEST(optimizers_copy_their_state)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "r", MP_FLOAT, 0, "");
    val(g, "t", MP_INT64, 0, "");
    val(g, "w1", MP_FLOAT, 2, "3,4");
    val(g, "w2", MP_DOUBLE, 1, "5");
    val(g, "g1", MP_FLOAT, 2, "3,4");
    val(g, "g2", MP_DOUBLE, 1, "5");
    val(g, "v1", MP_FLOAT, 2, "3,4");
    val(g, "v2", MP_DOUBLE, 1, "5");
    val(g, "h1", MP_FLOAT, 2, "3,4");
    val(g, "h2", MP_DOUBLE, 1, "5");
    node(g, "Adam", "ai.onnx.preview.training", "r,t,w1,w2,g1,g2,v1,v2,h1,h2", "nw1,nw2,nv1,nv2,nh1,nh2");
    node(g, "Momentum", "ai.onnx.preview.training", "r,t,w1,g1,v1", "mw,mv");
    mp_node *n = node(g, "Gradient", "ai.onnx.preview.training", "w1,w2", "dw1,dw2");
    attr_strings(g, n, "xs", 2, (const char *[]){"w1", "w2"});
    attr_s(g, n, "y", "loss");
    infer_ok(g);
    ck_type(g, "nw2", "float64[5]");
    ck_type(g, "nv1", "float32[3,4]");
    ck_type(g, "nh2", "float64[5]");
    ck_type(g, "mv", "float32[3,4]");
    ck_type(g, "dw1", "float32[3,4]");
    ck_type(g, "dw2", "float64[5]");
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    val(g, "r", MP_FLOAT, 0, "");
    val(g, "w1", MP_FLOAT, 2, "3,4");
    val(g, "g1", MP_FLOAT, 2, "4,3");
    node(g, "Adagrad", "ai.onnx.preview.training", "r,r,w1,g1,w1", "a,b");
    infer_fails(g, "gradient dim is 4", "expected 3");
    mp_graph_free(g);
}
END_TEST

START_TEST(ort_training_ops)
{
    mp_graph *g = mp_graph_new(NULL);
    val(g, "buf", MP_FLOAT, 2, "500,784");
    val(g, "grad", MP_FLOAT, 2, "500,784");
    val(g, "flag", MP_BOOL, 1, "1");
    node(g, "InPlaceAccumulatorV2", "com.microsoft", "buf,grad,flag", "done,out");
    val(g, "dy", MP_FLOAT, 2, "N,500");
    node(g, "ReluGrad", "com.microsoft", "dy,dy", "dx");
    val(g, "lp", MP_FLOAT, 2, "N,10");
    val(g, "lab", MP_INT32, 1, "N");
    val(g, "dl", MP_FLOAT, 0, "");
    node(g, "SoftmaxCrossEntropyLossGrad", "com.microsoft", "dl,lp,lab", "dlogits");
    val(g, "a", MP_FLOAT, 3, "B,4,8");
    val(g, "b", MP_FLOAT, 2, "16,8");
    attr_i(g, node(g, "FusedMatMul", "com.microsoft", "a,b", "fm"), "transB", 1);
    infer_ok(g);
    ck_type(g, "done", "bool[1]");
    ck_type(g, "out", "float32[500,784]");
    ck_type(g, "dx", "float32[N,500]");
    ck_type(g, "dlogits", "float32[N,10]");
    ck_type(g, "fm", "float32[B,4,16]");
    mp_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shape_nn");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, conv_keeps_symbolic_batch);
    tcase_add_test(tc, conv_stride1_keeps_symbolic_spatial);
    tcase_add_test(tc, conv_auto_pad_and_dilation);
    tcase_add_test(tc, conv_groups_and_depthwise);
    tcase_add_test(tc, conv_rejects_channel_mismatch);
    tcase_add_test(tc, conv_rejects_bad_attributes);
    tcase_add_test(tc, conv_unknown_rank_input);
    tcase_add_test(tc, conv_transpose_shapes);
    tcase_add_test(tc, pool_ceil_mode_and_indices);
    tcase_add_test(tc, pool_requires_kernel_shape);
    tcase_add_test(tc, maxunpool_and_roi);
    tcase_add_test(tc, matmul_promotes_1d_and_broadcasts);
    tcase_add_test(tc, matmul_rejects_inner_mismatch);
    tcase_add_test(tc, matmul_unknown_rank_and_integer);
    tcase_add_test(tc, gemm_transposes_and_checks_c);
    tcase_add_test(tc, einsum_explicit_implicit_ellipsis);
    tcase_add_test(tc, batchnorm_training_outputs);
    tcase_add_test(tc, layernorm_stats_follow_axis_and_stash_type);
    tcase_add_test(tc, dropout_mask_type_by_opset);
    tcase_add_test(tc, lstm_bidirectional_and_layout);
    tcase_add_test(tc, quantize_output_types);
    tcase_add_test(tc, losses_by_reduction);
    tcase_add_test(tc, grids);
    tcase_add_test(tc, nms_counts_known_boxes);
    tcase_add_test(tc, attention_3d_with_past);
    tcase_add_test(tc, linear_attention_and_causal_conv);
    tcase_add_test(tc, optimizers_copy_their_state);
    tcase_add_test(tc, ort_training_ops);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
