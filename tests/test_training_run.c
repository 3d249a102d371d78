/* test_training_run.c - whole training steps (forward, loss, backward,
 * update) run on the CPU executor: the loss of a small fixed synthetic data
 * set falls over 50 AdamW steps on the project's models and the third-party
 * MNIST model, every optimizer's update runs, and the first step's parameter
 * gradients match central finite differences of a float64 copy of the step. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/train.h"
#include "runtime/exec.h"

#define MODEL(f) MEMPLAN_SOURCE "/models/" f
#define MNIST MEMPLAN_SHARED "/models/third-party/mnist/model.onnx"

typedef struct trun {
    mp_model *m;
    mp_graph *g;
    mp_exec *ex;
    int32_t loss;
    mp_tensor **buf; /* per value: the bound buffer of inputs, parameters and state */
} trun;

static uint64_t rng = 1;
static double urand(void) /* [0, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static mp_tensor *f64_copy(mp_graph *g, const mp_tensor *t)
{
    mp_tensor *d = mp_tensor_new(g->arena, MP_DOUBLE, t->rank, t->dims);
    for (int64_t i = 0; t->data && i < t->numel; i++) mp_tensor_set_f64(d, i, mp_tensor_get_f64(t, i));
    return d;
}

/* Makes every float32 tensor of the imported graph float64: values, folded
 * contents, tensor attributes (Constant, ConstantOfShape), Cast targets. */
static void to_f64(mp_graph *g)
{
    for (int32_t i = 0; i < g->nvalues; i++) {
        mp_value *v = &g->values[i];
        if (v->dtype == MP_FLOAT) v->dtype = MP_DOUBLE;
        if (v->konst && v->konst->dtype == MP_FLOAT) v->konst = f64_copy(g, v->konst);
    }
    for (int32_t n = 0; n < g->nnodes; n++)
        for (int32_t k = 0; k < g->nodes[n].nattrs; k++) {
            mp_attr *a = &g->nodes[n].attrs[k];
            if (a->type == MP_ATTR_TENSOR && a->tensors[0]->dtype == MP_FLOAT) a->tensors[0] = f64_copy(g, a->tensors[0]);
            if (a->type == MP_ATTR_INT && !strcmp(a->name, "to") && a->i == MP_FLOAT) a->i = MP_DOUBLE;
        }
}

/* Loads, binds dims, infers and builds the step; keeps the loss and every
 * optimizer output after a run. With `from`, the graph is float64 and takes
 * its parameters and buffers from from's buffers / weights. */
static void setup(trun *r, const char *path, int nd, const char **names, const int64_t *vals, const mp_train_opts *o,
                  const trun *from)
{
    mp_err err = {""};
    memset(r, 0, sizeof *r);
    r->m = mp_onnx_load(path, &err);
    ck_assert_msg(r->m, "%s: %s", path, err.msg);
    mp_graph *g = r->g = r->m->graph;
    if (from) to_f64(g);
    mp_bindings b = {.batch = -1, .nnamed = nd, .names = names, .values = vals};
    ck_assert_msg(!mp_bind_dims(g, &b, &err) && !mp_infer(g, &err), "%s", err.msg);
    ck_assert_msg(!mp_train_build(g, o, &err), "%s", err.msg);
    int32_t *keep = mp_arena_alloc(g->arena, (size_t)(g->nvalues + 1) * sizeof *keep), nkeep = 1;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (n->phase == MP_PHASE_LOSS) keep[0] = r->loss = n->out[0];
        if (n->phase == MP_PHASE_OPTIMIZER)
            for (int32_t k = 0; k < n->nout; k++) keep[nkeep++] = n->out[k];
        if (n->phase == MP_PHASE_OPTIMIZER && n->nin > 1) keep[nkeep++] = n->in[1]; /* the gradient */
    }
    g->outputs = keep, g->noutputs = nkeep;
    r->ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(r->ex, "%s", err.msg);
    r->buf = mp_arena_alloc(g->arena, (size_t)g->nvalues * sizeof *r->buf);
    /* float32: the file's weights first, copied into our buffers; float64: our buffers first */
    if (!from) ck_assert_msg(!mp_exec_load_weights(r->ex, r->m, &err), "%s", err.msg);
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        bool src = from && mp_dtype_is_float(val->dtype) && (val->flags & MP_VAL_INITIALIZER);
        if (val->producer >= 0 || !(val->role == MP_ROLE_PARAM || val->role == MP_ROLE_OPT_STATE || src)) continue;
        int64_t dims[MP_MAX_RANK];
        for (int i = 0; i < val->rank; i++) dims[i] = val->dims[i].v;
        mp_tensor *b = r->buf[v] = mp_tensor_new(g->arena, val->dtype, val->rank, dims); /* state starts at 0 */
        const mp_tensor *w = NULL;
        if (src) {
            int32_t f = mp_graph_find(from->g, val->name);
            w = f >= 0 ? (from->buf[f] ? from->buf[f] : mp_exec_value(from->ex, f)) : NULL;
            ck_assert_msg(w && w->numel == b->numel, "no float32 weights for '%s'", val->name);
        } else if (val->role == MP_ROLE_PARAM) {
            w = mp_exec_value(r->ex, v); /* NULL when the file has no data: seeded uniform */
        }
        int64_t fan = val->rank > 1 ? b->numel / b->dims[0] : 1;
        for (int64_t i = 0; val->role != MP_ROLE_OPT_STATE && i < b->numel; i++)
            mp_tensor_set_f64(b, i, w ? mp_tensor_get_f64(w, i) : (2 * urand() - 1) * sqrt(3.0 / (double)fan));
        ck_assert_msg(!mp_exec_bind(r->ex, v, b, &err), "%s", err.msg);
    }
    if (from) ck_assert_msg(!mp_exec_load_weights(r->ex, r->m, &err), "%s", err.msg);
}

/* Binds a data input (graph input or the loss's labels / target) to t. */
static void bind_data(trun *r, const char *name, mp_tensor *t)
{
    mp_err err = {""};
    int32_t v = mp_graph_find(r->g, name);
    ck_assert_msg(v >= 0, "no value '%s'", name);
    ck_assert_msg(!mp_exec_bind(r->ex, v, t, &err), "%s", err.msg);
}

/* One step: runs the graph, then writes each update's outputs over the
 * buffers they alias (the parameters and their state). Returns the loss. */
static double step(trun *r, bool update)
{
    mp_err err = {""};
    ck_assert_msg(!mp_exec_run(r->ex, &err), "%s", err.msg);
    double loss = mp_tensor_get_f64(mp_exec_value(r->ex, r->loss), 0);
    ck_assert_msg(isfinite(loss), "loss %g", loss);
    for (int32_t i = 0; update && i < r->g->nnodes; i++) {
        const mp_node *n = &r->g->nodes[i];
        if (n->phase != MP_PHASE_OPTIMIZER || strcmp(n->domain, "memplan")) continue;
        for (int32_t k = 0; k < n->nout; k++) {
            int32_t dst = r->g->values[n->out[k]].alias;
            if (dst < 0) continue; /* not written in place (fp16's gradient check) */
            const mp_tensor *src = mp_exec_value(r->ex, n->out[k]);
            ck_assert_msg(src && r->buf[dst], "update output %d of '%s'", k, n->name);
            memcpy(r->buf[dst]->data, src->data, (size_t)src->numel * mp_elem_size(src->dtype));
        }
    }
    return loss;
}

static void close_run(trun *r)
{
    mp_exec_free(r->ex);
    mp_onnx_close(r->m);
}

/* Compares the float64 step's gradients with central differences of its loss
 * at `count` random entries of every parameter (eps 1e-6; |fd - ad| <=
 * 1e-8 + 1e-5 |fd|, i.e. 1e-5 relative), and with the float32 step's
 * gradients (1e-3 relative to the parameter's largest gradient). */
static void fd_check(trun *r64, trun *r32, int count)
{
    mp_graph *g = r64->g;
    step(r64, false);
    step(r32, false);
    int32_t upd[1024], nupd = 0;
    for (int32_t i = 0; i < g->nnodes && nupd < 1024; i++)
        if (g->nodes[i].phase == MP_PHASE_OPTIMIZER && !strcmp(g->nodes[i].domain, "memplan")) upd[nupd++] = i;
    ck_assert_int_gt(nupd, 0);
    double worst = 0, worst32 = 0;
    for (int c = 0; c < count * nupd; c++) {
        const mp_node *n = &g->nodes[upd[c / count]];
        mp_tensor *p = r64->buf[n->in[0]];
        const mp_tensor *gr = mp_exec_value(r64->ex, n->in[1]);
        int64_t i = (int64_t)(urand() * (double)p->numel);
        double ad = mp_tensor_get_f64(gr, i), v = mp_tensor_get_f64(p, i), eps = 1e-6;
        /* the float32 gradient of the same entry: same node order in both graphs */
        int32_t n32 = mp_graph_find(r32->g, g->values[n->in[0]].name);
        const mp_tensor *g32 = NULL, *all = gr;
        for (int32_t j = 0; j < r32->g->nnodes && n32 >= 0; j++)
            if (r32->g->nodes[j].phase == MP_PHASE_OPTIMIZER && r32->g->nodes[j].in[0] == n32)
                g32 = mp_exec_value(r32->ex, r32->g->nodes[j].in[1]);
        ck_assert(g32 && g32->numel == p->numel);
        mp_tensor_set_f64(p, i, v + eps);
        double lp = step(r64, false);
        mp_tensor_set_f64(p, i, v - eps);
        double lm = step(r64, false);
        mp_tensor_set_f64(p, i, v);
        step(r64, false); /* restore the gradients */
        double fd = (lp - lm) / (2 * eps);
        ck_assert_msg(fabs(fd - ad) <= 1e-8 + 1e-5 * fabs(fd), "%s[%lld]: autodiff %.10g, finite difference %.10g",
                      g->values[n->in[0]].name, (long long)i, ad, fd);
        double gmax = 0;
        for (int64_t j = 0; j < all->numel; j++) gmax = fmax(gmax, fabs(mp_tensor_get_f64(all, j)));
        double e32 = fabs(mp_tensor_get_f64(g32, i) - ad) / (gmax ? gmax : 1);
        ck_assert_msg(e32 <= 1e-3, "%s[%lld]: float32 gradient %.8g, float64 %.8g", g->values[n->in[0]].name,
                      (long long)i, mp_tensor_get_f64(g32, i), ad);
        worst = fmax(worst, fabs(fd - ad) / fmax(fabs(fd), 1e-12));
        worst32 = fmax(worst32, e32);
    }
    printf("  fd: %d entries, worst relative error %.2e (float64), float32 vs float64 %.2e of max |g|\n", count * nupd, worst,
           worst32);
}

/* Trains for `steps` steps; first and last loss into *first, *last. */
static void train(trun *r, int steps, double *first, double *last)
{
    for (int s = 0; s < steps; s++) {
        double l = step(r, true);
        if (!s) *first = l;
        *last = l;
    }
}

/* Samples of class i % classes: a fixed random prototype per class plus noise. */
static void class_data(mp_tensor *x, mp_tensor *labels, int classes)
{
    int64_t n = x->dims[0], per = x->numel / n;
    double *proto = malloc((size_t)(classes * per) * sizeof *proto);
    for (int64_t i = 0; i < classes * per; i++) proto[i] = 2 * urand() - 1;
    for (int64_t s = 0; s < n; s++) {
        int c = (int)(s % classes);
        if (labels) mp_tensor_set_i64(labels, s, c);
        for (int64_t j = 0; j < per; j++) mp_tensor_set_f64(x, s * per + j, proto[c * per + j] + 0.3 * (2 * urand() - 1));
    }
    free(proto);
}

/* A model with input [batch, ...] and logits [batch, 10]: 50 AdamW steps on
 * `batch` samples; FD check of the first step. */
static void run_classifier(const char *path, int64_t batch, const int64_t *in_dims, int in_rank)
{
    mp_train_opts o = mp_train_defaults();
    trun r, r64;
    rng = 7;
    setup(&r, path, 1, (const char *[]){"batch"}, (int64_t[]){batch}, &o, NULL);
    setup(&r64, path, 1, (const char *[]){"batch"}, (int64_t[]){batch}, &o, &r);
    mp_tensor *x = mp_tensor_new(r.g->arena, MP_FLOAT, in_rank, in_dims), *y = mp_tensor_new(r.g->arena, MP_INT64, 1, &batch);
    class_data(x, y, 10);
    mp_tensor *x64 = f64_copy(r64.g, x);
    bind_data(&r, "input", x), bind_data(&r, "labels", y);
    bind_data(&r64, "input", x64), bind_data(&r64, "labels", y);
    fd_check(&r64, &r, 2);
    double first = 0, last = 0;
    train(&r, 50, &first, &last);
    printf("  %s: loss %.4f -> %.4f over 50 AdamW steps\n", path, first, last);
    ck_assert_msg(last < 0.5 * first, "loss %g -> %g", first, last);
    close_run(&r64);
    close_run(&r);
}

START_TEST(mlp)
{
    run_classifier(MODEL("mlp.onnx"), 64, (int64_t[]){64, 784}, 2);
}
END_TEST

/* BatchNormalization in training mode (batch statistics); 8 samples keep it fast under ASan. */
START_TEST(cnn_bn)
{
    run_classifier(MODEL("cnn_bn.onnx"), 8, (int64_t[]){8, 3, 32, 32}, 4);
}
END_TEST

/* Every optimizer's update runs and lowers the MLP's loss in 20 steps by 5 % at least
 * (plain SGD at its default lr 1e-2 is the slowest: 2.28 -> 2.13). */
START_TEST(optimizers)
{
    const mp_opt_kind kinds[] = {MP_OPT_SGD, MP_OPT_MOMENTUM, MP_OPT_ADAM, MP_OPT_ADAMW, MP_OPT_ADAFACTOR};
    const char *names[] = {"sgd", "momentum", "adam", "adamw", "adafactor"};
    for (int k = 0; k < 5; k++) {
        mp_train_opts o = mp_train_defaults();
        o.optimizer = kinds[k];
        trun r;
        rng = 11;
        setup(&r, MODEL("mlp.onnx"), 1, (const char *[]){"batch"}, (int64_t[]){16}, &o, NULL);
        mp_tensor *x = mp_tensor_new(r.g->arena, MP_FLOAT, 2, (int64_t[]){16, 784});
        mp_tensor *y = mp_tensor_new(r.g->arena, MP_INT64, 1, (int64_t[]){16});
        class_data(x, y, 10);
        bind_data(&r, "input", x), bind_data(&r, "labels", y);
        double first = 0, last = 0;
        train(&r, 20, &first, &last);
        printf("  mlp %s: loss %.4f -> %.4f over 20 steps\n", names[k], first, last);
        ck_assert_msg(last < 0.95 * first, "%s: loss %g -> %g", names[k], first, last);
        close_run(&r);
    }
}
END_TEST

/* The decoder learns to copy its input tokens (labels = input) at 4 x 16. */
START_TEST(gpt_decoder)
{
    mp_train_opts o = mp_train_defaults();
    const char *dn[] = {"batch", "sequence"};
    const int64_t dv[] = {4, 16};
    trun r, r64;
    rng = 3;
    setup(&r, MODEL("gpt_decoder.onnx"), 2, dn, dv, &o, NULL);
    setup(&r64, MODEL("gpt_decoder.onnx"), 2, dn, dv, &o, &r);
    /* attention's K^T is a transposed view (no copy): the gradients below check its reads */
    int tviews = 0;
    for (int32_t v = 0; v < r.g->nvalues; v++) tviews += (r.g->values[v].flags & MP_VAL_TVIEW) != 0;
    ck_assert_int_gt(tviews, 0);
    mp_tensor *tok = mp_tensor_new(r.g->arena, MP_INT64, 2, dv);
    for (int64_t i = 0; i < tok->numel; i++) mp_tensor_set_i64(tok, i, (int64_t)(urand() * 512));
    bind_data(&r, "input", tok), bind_data(&r, "labels", tok);
    bind_data(&r64, "input", tok), bind_data(&r64, "labels", tok);
    fd_check(&r64, &r, 1);
    double first = 0, last = 0;
    train(&r, 50, &first, &last);
    printf("  gpt_decoder: loss %.4f -> %.4f over 50 AdamW steps\n", first, last);
    ck_assert_msg(last < 0.5 * first, "loss %g -> %g", first, last);
    close_run(&r64);
    close_run(&r);
}
END_TEST

/* The ONNX zoo MNIST model has a fixed batch of 1: 8 samples in turn; the
 * mean loss of the last 8 of 48 steps is below half that of the first 8. */
START_TEST(mnist)
{
    if (access(MNIST, R_OK)) return;
    mp_train_opts o = mp_train_defaults();
    trun r, r64;
    rng = 5;
    setup(&r, MNIST, 0, NULL, NULL, &o, NULL);
    setup(&r64, MNIST, 0, NULL, NULL, &o, &r);
    const char *in = r.g->values[r.g->inputs[0]].name;
    mp_tensor *x = mp_tensor_new(r.g->arena, MP_FLOAT, 4, (int64_t[]){8, 1, 28, 28});
    mp_tensor *y = mp_tensor_new(r.g->arena, MP_INT64, 1, (int64_t[]){8});
    class_data(x, y, 8);
    mp_tensor *xs[8], *ys[8];
    for (int s = 0; s < 8; s++) {
        xs[s] = mp_tensor_new(r.g->arena, MP_FLOAT, 4, (int64_t[]){1, 1, 28, 28});
        ys[s] = mp_tensor_new(r.g->arena, MP_INT64, 1, (int64_t[]){1});
        memcpy(xs[s]->data, (float *)x->data + s * 784, 784 * sizeof(float));
        mp_tensor_set_i64(ys[s], 0, mp_tensor_get_i64(y, s));
    }
    bind_data(&r, in, xs[0]), bind_data(&r, "labels", ys[0]);
    bind_data(&r64, in, f64_copy(r64.g, xs[0])), bind_data(&r64, "labels", ys[0]);
    fd_check(&r64, &r, 2);
    double head = 0, tail = 0;
    for (int s = 0; s < 48; s++) {
        bind_data(&r, in, xs[s % 8]), bind_data(&r, "labels", ys[s % 8]);
        double l = step(&r, true);
        if (s < 8) head += l / 8;
        if (s >= 40) tail += l / 8;
    }
    printf("  mnist: mean loss of the first 8 steps %.4f, last 8 %.4f (48 AdamW steps)\n", head, tail);
    ck_assert_msg(tail < 0.5 * head, "loss %g -> %g", head, tail);
    close_run(&r64);
    close_run(&r);
}
END_TEST

static int32_t dvalue(mp_graph *g, const char *name, uint32_t flags, int rank, const int64_t *dims)
{
    int32_t v = mp_graph_add_value(g, name);
    mp_dim d[4];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    if (rank >= 0) mp_value_set(g, v, MP_DOUBLE, rank, d);
    g->values[v].flags = flags;
    return v;
}

/* sum(Tanh(Sum(Mul(x, W), b, c))) in float64, b [4] and c [3, 1] broadcast:
 * the Sum rule's gradients against central differences (eps 1e-6, 1e-6 relative). */
START_TEST(finite_differences_sum)
{
    mp_err err = {""};
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 2, (int64_t[]){3, 4}), w = dvalue(g, "W", MP_VAL_INITIALIZER, 2, (int64_t[]){3, 4});
    int32_t b = dvalue(g, "b", MP_VAL_INITIALIZER, 1, (int64_t[]){4}), c = dvalue(g, "c", MP_VAL_INITIALIZER, 2, (int64_t[]){3, 1});
    int32_t m = dvalue(g, "m", 0, -1, NULL), s = dvalue(g, "s", 0, -1, NULL), y = dvalue(g, "y", MP_VAL_OUTPUT, -1, NULL);
    mp_graph_add_node(g, "mul", "Mul", "", 2, (int32_t[]){x, w}, 1, &m);
    mp_graph_add_node(g, "sum", "Sum", "", 3, (int32_t[]){m, b, c}, 1, &s);
    mp_graph_add_node(g, "tanh", "Tanh", "", 1, &s, 1, &y);
    int32_t inits[3] = {w, b, c};
    g->inputs = mp_arena_dup(g->arena, &x, sizeof x), g->ninputs = 1;
    g->inits = mp_arena_dup(g->arena, inits, sizeof inits), g->ninits = 3;
    g->outputs = mp_arena_dup(g->arena, &y, sizeof y), g->noutputs = 1;
    ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s", err.msg);
    mp_train_opts o = mp_train_defaults();
    o.loss = MP_LOSS_SUM, o.optimizer = MP_OPT_SGD;
    ck_assert_msg(!mp_train_build(g, &o, &err), "%s", err.msg);
    int32_t keep[4], loss = -1, nkeep = 1, param[4];
    for (int32_t i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].phase == MP_PHASE_LOSS) loss = g->nodes[i].out[0];
        if (g->nodes[i].phase == MP_PHASE_OPTIMIZER) param[nkeep] = g->nodes[i].in[0], keep[nkeep++] = g->nodes[i].in[1];
    }
    ck_assert_int_eq(nkeep, 4);
    keep[0] = loss;
    g->outputs = keep, g->noutputs = nkeep;
    mp_exec *ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(ex, "%s", err.msg);
    mp_tensor *data[4];
    int32_t ids[4] = {x, w, b, c};
    rng = 9;
    for (int k = 0; k < 4; k++) {
        const mp_value *v = &g->values[ids[k]];
        int64_t dims[2] = {v->dims[0].v, v->rank > 1 ? v->dims[1].v : 1};
        data[k] = mp_tensor_new(g->arena, MP_DOUBLE, v->rank, dims);
        for (int64_t i = 0; i < data[k]->numel; i++) mp_tensor_set_f64(data[k], i, 2 * urand() - 1);
        ck_assert_msg(!mp_exec_bind(ex, ids[k], data[k], &err), "%s", err.msg);
    }
    ck_assert_msg(!mp_exec_run(ex, &err), "%s", err.msg);
    for (int k = 1; k < 4; k++) {
        int j = 1;
        while (j < 4 && ids[j] != param[k]) j++;
        ck_assert_int_lt(j, 4);
        mp_tensor *p = data[j];
        double an[12];
        for (int64_t i = 0; i < p->numel; i++) an[i] = mp_tensor_get_f64(mp_exec_value(ex, keep[k]), i);
        for (int64_t i = 0; i < p->numel; i++) {
            double v = mp_tensor_get_f64(p, i), eps = 1e-6, lp, lm;
            mp_tensor_set_f64(p, i, v + eps);
            ck_assert_msg(!mp_exec_run(ex, &err), "%s", err.msg);
            lp = mp_tensor_get_f64(mp_exec_value(ex, loss), 0);
            mp_tensor_set_f64(p, i, v - eps);
            ck_assert_msg(!mp_exec_run(ex, &err), "%s", err.msg);
            lm = mp_tensor_get_f64(mp_exec_value(ex, loss), 0);
            mp_tensor_set_f64(p, i, v);
            double fd = (lp - lm) / (2 * eps);
            ck_assert_msg(fabs(fd - an[i]) <= 1e-6 * (1 + fabs(fd)), "%s[%lld]: autodiff %.9g, fd %.9g",
                          g->values[param[k]].name, (long long)i, an[i], fd);
        }
    }
    mp_exec_free(ex);
    mp_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("training_run");
    TCase *t = tcase_create("run");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, mlp);
    tcase_add_test(t, cnn_bn);
    tcase_add_test(t, optimizers);
    tcase_add_test(t, gpt_decoder);
    tcase_add_test(t, mnist);
    tcase_add_test(t, finite_differences_sum);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
