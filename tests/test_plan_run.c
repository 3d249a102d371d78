/* test_plan_run.c - plans written, loaded and run for real (codegen/plan.h,
 * runtime/plan_run.h): for each model, at budgets from the store-everything
 * peak down to the smallest feasible one, the plan runs in one arena of
 * exactly its planned size (the measured peak equals it), and the loss and
 * every parameter gradient are bit-identical to the unplanned step of the same
 * precision; in bf16 and fp16 they are also within stated tolerances of the
 * fp32 step. Corrupted plans are rejected with their messages. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/plan.h"
#include "onnx_builder.h" /* mp_ob_*: the sliced-weights model */
#include "passes/autodiff.h" /* defines: MP_FP16_LOSS_SCALE (the first scale) */
#include "passes/cost.h"
#include "passes/lifetime.h"
#include "passes/remat.h"
#include "runtime/plan_run.h"

#define MODEL(f) MEMPLAN_SOURCE "/models/" f
#define MNIST MEMPLAN_SHARED "/models/third-party/mnist/model.onnx"
#define SEED 7

/* Reduced precision against fp32: ||x_low - x_fp32|| / ||x_fp32|| per tensor
 * (the loss, then each parameter's gradient, fp16's loss scale divided out).
 * bf16 keeps 8 significant bits, fp16 11: one rounding is off by at most
 * u = 2^-8 (3.9e-3) or 2^-11 (4.9e-4) relative. The loss is one softmax
 * cross-entropy of rounded logits, rounded once: a few u (4u). A gradient
 * compounds a rounding per layer on the way back, through the rounded working
 * weights, and through ReLU masks whose inputs change sign when rounded; the
 * first layers' gradients are worst, tens of u (measured up to 28u, mnist's
 * first convolution in bf16; docs/validation.md): 48u in norm. */
#define BF16_U 0x1p-8
#define FP16_U 0x1p-11
#define LOSS_RTOL(u) (4 * (u))
#define GRAD_RTOL(u) (48 * (u))
#define FP16_MAX 65504.0

static char dir[256];

/* The unplanned step: a fresh import, one malloc per value. */
typedef struct ref {
    mp_model *m;
    mp_schedule s;
    mp_exec *x;
} ref;

static void ref_free(ref *r)
{
    mp_exec_free(r->x);
    mp_schedule_free(&r->s);
    mp_onnx_close(r->m);
}

/* The unplanned step; with keep_updates, the parameters each update writes
 * are kept after it too, as outputs (each a buffer of its own here). */
static void ref_run_keeping(ref *r, const char *path, const mp_plan_opts *o, bool keep_updates)
{
    mp_err err = {""};
    r->m = mp_plan_step_new(path, o, &r->s, &err);
    ck_assert_msg(r->m, "%s: %s", path, err.msg);
    mp_graph *g = r->m->graph;
    if (keep_updates) {
        int32_t *outs = mp_arena_alloc(g->arena, (size_t)(g->noutputs + g->nnodes) * sizeof *outs), n = g->noutputs;
        ck_assert(outs);
        memcpy(outs, g->outputs, (size_t)n * sizeof *outs);
        for (int32_t i = 0; i < g->nnodes; i++)
            if (g->nodes[i].phase == MP_PHASE_OPTIMIZER && g->nodes[i].nout && g->values[g->nodes[i].out[0]].alias >= 0)
                outs[n++] = g->nodes[i].out[0];
        g->outputs = outs;
        g->noutputs = n;
    }
    r->x = mp_exec_new(g, NULL, &err);
    ck_assert_msg(r->x, "%s", err.msg);
    ck_assert_msg(!mp_plan_bind_inputs(r->x, g, NULL, NULL, SEED, NULL, NULL, &err), "%s", err.msg);
    ck_assert_msg(!mp_exec_run(r->x, &err), "%s %s: %s", path, mp_plan_precision_name(o->precision), err.msg);
}

static void ref_run(ref *r, const char *path, const mp_plan_opts *o) { ref_run_keeping(r, path, o, false); }

/* Every output of b (loss, then gradients) is bit-identical to the same-named one of a. */
static int compare_bits(const ref *a, const mp_graph *gb, const mp_exec *xb, const char *what)
{
    const mp_graph *ga = a->m->graph;
    ck_assert_int_eq(ga->noutputs, gb->noutputs);
    for (int32_t k = 0; k < ga->noutputs; k++) {
        const mp_tensor *ta = mp_exec_value(a->x, ga->outputs[k]), *tb = mp_exec_value(xb, gb->outputs[k]);
        const char *name = ga->values[ga->outputs[k]].name;
        ck_assert_msg(ta && tb && ta->numel == tb->numel, "%s: '%s' missing", what, name);
        ck_assert_msg(!strcmp(name, gb->values[gb->outputs[k]].name), "%s: output %d differs", what, k);
        ck_assert_msg(ta->dtype == tb->dtype && !memcmp(ta->data, tb->data, (size_t)ta->numel * mp_elem_size(ta->dtype)),
                      "%s: '%s' is not bit-identical", what, name);
    }
    return ga->noutputs;
}

/* The largest |gradient| of a step (outputs after the loss). */
static double largest_gradient(const ref *r)
{
    const mp_graph *g = r->m->graph;
    double mx = 0;
    for (int32_t k = 1; k < g->noutputs; k++) {
        const mp_tensor *t = mp_exec_value(r->x, g->outputs[k]);
        for (int64_t i = 0; t && i < t->numel; i++) mx = fmax(mx, fabs(mp_tensor_get_f64(t, i)));
    }
    return mx;
}

static bool all_finite(const ref *r)
{
    const mp_graph *g = r->m->graph;
    for (int32_t k = 0; k < g->noutputs; k++) {
        const mp_tensor *t = mp_exec_value(r->x, g->outputs[k]);
        for (int64_t i = 0; t && i < t->numel; i++)
            if (!isfinite(mp_tensor_get_f64(t, i))) return false;
    }
    return true;
}

/* The reduced-precision step low against the fp32 step: each output within
 * its tolerance (see LOSS_RTOL); the largest relative errors go to worst[0]
 * (loss) and worst[1] (gradients). */
static void compare_fp32(const ref *fp32, const ref *low, mp_dtype precision, const char *what, double worst[2])
{
    const mp_graph *ga = fp32->m->graph, *gb = low->m->graph;
    double u = precision == MP_BFLOAT16 ? BF16_U : FP16_U;
    double scale = precision == MP_FLOAT16 ? MP_FP16_LOSS_SCALE : 1; /* on the gradients */
    ck_assert_int_eq(ga->noutputs, gb->noutputs);
    worst[0] = worst[1] = 0;
    for (int32_t k = 0; k < ga->noutputs; k++) {
        const mp_tensor *ta = mp_exec_value(fp32->x, ga->outputs[k]), *tb = mp_exec_value(low->x, gb->outputs[k]);
        const char *name = ga->values[ga->outputs[k]].name;
        ck_assert_msg(ta && tb && ta->numel == tb->numel, "%s: '%s' missing", what, name);
        ck_assert_msg(!strcmp(name, gb->values[gb->outputs[k]].name), "%s: output %d differs", what, k);
        ck_assert_msg(tb->dtype == (k ? precision : tb->dtype), "%s: gradient '%s' is %s", what, name, mp_dtype_name(tb->dtype));
        double d2 = 0, n2 = 0;
        for (int64_t i = 0; i < ta->numel; i++) {
            double x = mp_tensor_get_f64(ta, i), y = mp_tensor_get_f64(tb, i) / (k ? scale : 1);
            d2 += (x - y) * (x - y), n2 += x * x;
        }
        ck_assert_msg(n2 > 0, "%s: '%s' is zero in fp32: nothing to compare", what, name);
        double rel = sqrt(d2 / n2), tol = k ? GRAD_RTOL(u) : LOSS_RTOL(u);
        ck_assert_msg(rel <= tol, "%s: '%s' is off by %g relative to fp32 (tolerance %g)", what, name, rel, tol);
        if (rel > worst[k > 0]) worst[k > 0] = rel;
    }
}

/* The unplanned reduced-precision step `low` against the unplanned fp32 one. */
static void against_fp32(const char *path, const mp_plan_opts *o, const ref *low)
{
    ref fp32;
    mp_plan_opts f = *o;
    f.precision = MP_FLOAT;
    ref_run(&fp32, path, &f);
    const char *file = strrchr(path, '/') + 1;
    double gmax = largest_gradient(&fp32), u = o->precision == MP_BFLOAT16 ? BF16_U : FP16_U;
    if (o->precision == MP_FLOAT16 && gmax * MP_FP16_LOSS_SCALE > FP16_MAX) {
        /* the first loss scale cannot hold this step: the fp16 gradients overflow, and
         * the update skips the step and halves the scale (fp16_loss_scale) */
        ck_assert_msg(!all_finite(low), "%s: fp32 gradients reach %g, so the fp16 step must overflow", path, gmax);
        printf("  %-24s fp16: the fp32 gradients reach %.3g, times the loss scale %g past fp16's %g: the step "
               "overflows (inf), not compared with fp32\n", file, gmax, MP_FP16_LOSS_SCALE, FP16_MAX);
    } else {
        double worst[2];
        compare_fp32(&fp32, low, o->precision, path, worst);
        printf("  %-24s %s vs fp32: loss %.6f vs %.6f, relative error loss %.2e (%.1fu, tolerance %.0fu), worst gradient "
               "%.2e (%.1fu, tolerance %.0fu)\n",
               file, mp_plan_precision_name(o->precision), mp_tensor_get_f64(mp_exec_value(low->x, low->m->graph->outputs[0]), 0),
               mp_tensor_get_f64(mp_exec_value(fp32.x, fp32.m->graph->outputs[0]), 0), worst[0], worst[0] / u,
               LOSS_RTOL(u) / u, worst[1], worst[1] / u, GRAD_RTOL(u) / u);
    }
    ref_free(&fp32);
}

/* Applies order rs to a fresh step, writes the plan, loads it, runs one step. */
static void plan_and_run(const char *path, const mp_plan_opts *o, const mp_rsched *rs, const ref *want, int64_t budget,
                         int64_t model_peak)
{
    mp_err err = {""};
    mp_schedule s, applied;
    mp_model *m = mp_plan_step_new(path, o, &s, &err);
    ck_assert_msg(m, "%s", err.msg);
    ck_assert_msg(!mp_remat_apply(m->graph, &s, rs, &applied, &err), "%s", err.msg);
    mp_plan_info info;
    ck_assert_msg(!mp_plan_write(dir, path, o, m->graph, &applied, -1, &info, &err), "%s", err.msg);
    mp_schedule_free(&s);
    mp_schedule_free(&applied);
    mp_onnx_close(m);

    mp_plan p;
    ck_assert_msg(!mp_plan_load(dir, &p, &err), "%s", err.msg);
    ck_assert_int_eq(p.arena_bytes, info.arena_bytes);
    ck_assert_int_le(p.lower_bound, p.arena_bytes);
    mp_plan_run_opts ro = {.seed = SEED};
    mp_plan_exec *pe = mp_plan_exec_new(&p, &ro, &err);
    ck_assert_msg(pe, "%s", err.msg);
    double loss, secs;
    ck_assert_msg(!mp_plan_exec_step(pe, &loss, &secs, &err), "%s", err.msg);
    /* the run touched exactly the planned arena */
    ck_assert_int_eq(mp_plan_exec_peak(pe), p.arena_bytes);
    int nrec = 0;
    for (int32_t i = 0; i < rs->n; i++) nrec += rs->recompute[i];
    int n = compare_bits(want, mp_plan_exec_graph(pe), mp_plan_exec_executor(pe), path);
    printf("  %-24s %s budget %10lld  model peak %10lld  arena %10lld  lower bound %10lld  (%.4fx)  %d recomputes  "
           "loss %.6f  %d tensors identical\n",
           strrchr(path, '/') + 1, mp_plan_precision_name(o->precision), (long long)budget, (long long)model_peak,
           (long long)p.arena_bytes, (long long)p.lower_bound, (double)p.arena_bytes / (double)p.lower_bound,
           nrec, loss, n);
    mp_plan_exec_free(pe);
    mp_plan_free(&p);
}

/* Plans path at nbudget budgets from store-everything down to the minimum. */
static void check_model(const char *path, mp_plan_opts o, int nbudget)
{
    if (access(path, R_OK)) {
        printf("  skipped: %s is absent\n", path);
        return;
    }
    mp_err err = {""};
    ref want;
    ref_run(&want, path, &o);
    if (o.precision != MP_FLOAT) against_fp32(path, &o, &want);
    /* the planning graph: the same step, its rgraph and decision space */
    mp_schedule s;
    mp_model *m = mp_plan_step_new(path, &o, &s, &err);
    ck_assert_msg(m, "%s", err.msg);
    mp_lifetimes lt;
    mp_rgraph rg;
    mp_rspace sp;
    const mp_gpu *gpu = mp_gpu_find("a100-80", &err);
    ck_assert_msg(gpu, "%s", err.msg);
    ck_assert_msg(!mp_lifetime_compute(m->graph, &s, &lt, &err), "%s", err.msg);
    ck_assert_msg(!mp_rgraph_from_training(m->graph, &s, &lt, gpu, &rg, &err), "%s", err.msg);
    ck_assert_msg(!mp_rspace_build(&rg, NULL, &sp, &err), "%s", err.msg);
    mp_rsolve_opts so = mp_rsolve_defaults();
    so.time_limit = 2;
    int64_t min_peak;
    mp_rplan minp;
    ck_assert_msg(!mp_remat_min_peak(&sp, &so, &min_peak, &minp, &err), "%s", err.msg);
    so.warm = &minp; /* feasible at every budget below: no solve comes back empty on a loaded machine */
    ck_assert_int_le(min_peak, sp.base_peak);
    if (min_peak == sp.base_peak) nbudget = 1; /* nothing to trade: parameters and optimizer state set the peak */
    for (int k = 0; k < nbudget; k++) {
        int64_t budget = sp.base_peak - (int64_t)((double)(sp.base_peak - min_peak) * k / (nbudget > 1 ? nbudget - 1 : 1));
        mp_rplan rp;
        mp_rsolve_info info;
        ck_assert_msg(!mp_remat_solve(&sp, budget, &so, &rp, &info, &err), "%s", err.msg);
        ck_assert_msg(info.status != MP_RSOLVE_INFEASIBLE, "%s: budget %lld infeasible", path, (long long)budget);
        mp_rsched rs;
        mp_rcount c;
        ck_assert_msg(!mp_rplan_emit(&sp, &rp, &rs, &err) && !mp_rsched_count(&rg, &rs, &c, &err), "%s", err.msg);
        ck_assert_int_le(c.peak_bytes, budget);
        plan_and_run(path, &o, &rs, &want, budget, c.peak_bytes);
        mp_rsched_free(&rs);
        mp_rplan_free(&rp);
    }
    mp_rplan_free(&minp);
    mp_rspace_free(&sp);
    mp_rgraph_free(&rg);
    mp_lifetime_free(&lt);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    ref_free(&want);
}

static mp_plan_opts opts(int64_t batch, const char *dim, int64_t value)
{
    mp_plan_opts o = mp_plan_defaults();
    o.batch = batch;
    if (dim) {
        snprintf(o.dim_names[0], sizeof o.dim_names[0], "%s", dim);
        o.dim_values[0] = value;
        o.ndims = 1;
    }
    snprintf(o.strategy, sizeof o.strategy, "ilp");
    return o;
}

START_TEST(mlp) { check_model(MODEL("mlp.onnx"), opts(256, NULL, 0), 4); }
END_TEST

START_TEST(cnn_bn) { check_model(MODEL("cnn_bn.onnx"), opts(2, NULL, 0), 4); }
END_TEST

START_TEST(gpt_decoder) { check_model(MODEL("gpt_decoder.onnx"), opts(4, "sequence", 64), 3); }
END_TEST

START_TEST(mnist) { check_model(MNIST, opts(-1, NULL, 0), 4); }
END_TEST

/* PyTorch's MultiheadAttention exports its packed in_proj_weight as Slices of
 * one parameter, each read through a Transpose: a transposed view of an
 * activation whose last read, in the backward, goes through the view. Three
 * such blocks; the runner must free each slice when its view is read last
 * (it kept them live to the end, and reported a later tensor placed there as
 * an overlap). */
START_TEST(sliced_weight_views)
{
    char path[320];
    snprintf(path, sizeof path, "%s/sliced_weights.onnx", dir);
    mp_ob *b = mp_ob_new("main_graph");
    const char *h = mp_ob_input(b, "input", MP_FLOAT, 2, (const char *[]){"batch", "16"});
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "in_proj%d", i);
        const char *w = mp_ob_param_uniform(b, name, 2, (int64_t[]){48, 16}, 0.25f), *parts[2];
        for (int k = 0; k < 2; k++) {
            const char *in[4] = {w, mp_ob_const_i64(b, 1, 1, (int64_t[]){16 * (k + 1)}),
                                 mp_ob_const_i64(b, 1, 1, (int64_t[]){16 * (k + 2)}), mp_ob_const_i64(b, 1, 1, (int64_t[]){0})};
            const char *slice = mp_ob_op(b, "Slice", 4, in), *t = mp_ob_op(b, "Transpose", 1, &slice);
            const char *mm[2] = {h, t};
            parts[k] = mp_ob_op(b, "MatMul", 2, mm);
        }
        const char *prod = mp_ob_op(b, "Mul", 2, parts);
        h = mp_ob_op(b, "Tanh", 1, &prod);
    }
    mp_ob_output(b, h, "output", MP_FLOAT, 2, (const char *[]){"batch", "16"});
    mp_err err = {""};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
    check_model(path, opts(64, NULL, 0), 3);
}
END_TEST

/* The parameters each update of a's step wrote against the same-named ones
 * of b's (both kept: ref_run_keeping): how many are bit-identical, of *total. */
static int same_updates(const ref *a, const ref *b, const char *what, int *total)
{
    const mp_graph *ga = a->m->graph, *gb = b->m->graph;
    int same = 0;
    *total = 0;
    for (int32_t i = 0; i < ga->nnodes; i++) {
        const mp_node *nd = &ga->nodes[i];
        if (nd->phase != MP_PHASE_OPTIMIZER || !nd->nout || ga->values[nd->out[0]].alias != nd->in[0] ||
            ga->values[nd->in[0]].role != MP_ROLE_PARAM)
            continue;
        const char *name = ga->values[nd->out[0]].name;
        int32_t vb = mp_graph_find(gb, name);
        ck_assert_msg(vb >= 0, "%s: no '%s'", what, name);
        const mp_tensor *ta = mp_exec_value(a->x, nd->out[0]), *tb = mp_exec_value(b->x, vb);
        ck_assert_msg(ta && tb && ta->numel == tb->numel && ta->dtype == tb->dtype, "%s: '%s' missing", what, name);
        same += !memcmp(ta->data, tb->data, (size_t)ta->numel * mp_elem_size(ta->dtype));
        (*total)++;
    }
    return same;
}

/* --optimizer-in-backward: each update right after its gradient is final, so
 * the plan keeps the loss and the updated parameters (not the gradients, which
 * die at their updates). Planned down to its own least peak and run: the
 * arena measured, outputs bit-identical to the unplanned step of that order;
 * and the parameters it updates bit-identical to the default step's, whose
 * updates run after the whole backward (only the order differs). */
START_TEST(optimizer_in_backward)
{
    static const struct {
        const char *path;
        int64_t batch;
        const char *dim;
        int64_t value;
    } models[] = {{MODEL("cnn_bn.onnx"), 2, NULL, 0}, {MODEL("gpt_decoder.onnx"), 4, "sequence", 64}};
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        mp_plan_opts o = opts(models[k].batch, models[k].dim, models[k].value), f = o;
        f.optimizer_in_backward = true;
        check_model(models[k].path, f, 3);
        ref a, b, c;
        ref_run_keeping(&a, models[k].path, &o, true);
        ref_run_keeping(&b, models[k].path, &f, true);
        int total, n = same_updates(&a, &b, models[k].path, &total);
        ck_assert_int_gt(total, 0);
        ck_assert_int_eq(n, total);
        /* the check sees a different update: SGD's parameters are not AdamW's */
        f.optimizer = MP_OPT_SGD;
        ref_run_keeping(&c, models[k].path, &f, true);
        ck_assert_int_eq(same_updates(&a, &c, models[k].path, &total), 0);
        printf("  %-24s optimizer in the backward: %d updated parameters bit-identical to the default step's\n",
               strrchr(models[k].path, '/') + 1, n);
        ref_free(&a);
        ref_free(&b);
        ref_free(&c);
    }
}
END_TEST

static mp_plan_opts at(mp_plan_opts o, mp_dtype precision)
{
    o.precision = precision;
    return o;
}

/* The same models in bf16 and fp16, at fewer budgets (the fp32 cases cover the range). */
START_TEST(mlp_low)
{
    check_model(MODEL("mlp.onnx"), at(opts(256, NULL, 0), MP_BFLOAT16), 3);
    check_model(MODEL("mlp.onnx"), at(opts(256, NULL, 0), MP_FLOAT16), 3);
}
END_TEST

START_TEST(cnn_bn_low)
{
    check_model(MODEL("cnn_bn.onnx"), at(opts(2, NULL, 0), MP_BFLOAT16), 2);
    check_model(MODEL("cnn_bn.onnx"), at(opts(2, NULL, 0), MP_FLOAT16), 2);
}
END_TEST

START_TEST(gpt_decoder_low)
{
    check_model(MODEL("gpt_decoder.onnx"), at(opts(4, "sequence", 64), MP_BFLOAT16), 2);
    check_model(MODEL("gpt_decoder.onnx"), at(opts(4, "sequence", 64), MP_FLOAT16), 2);
}
END_TEST

START_TEST(mnist_low)
{
    check_model(MNIST, at(opts(-1, NULL, 0), MP_BFLOAT16), 2);
    check_model(MNIST, at(opts(-1, NULL, 0), MP_FLOAT16), 2);
}
END_TEST

/* path's step planned in its store-everything order, written to dir, loaded into
 * p and prepared to run with ro. */
static mp_plan_exec *store_everything_exec(const char *path, const mp_plan_opts *o, const mp_plan_run_opts *ro,
                                           mp_plan *p)
{
    mp_err err = {""};
    mp_schedule s;
    mp_model *m = mp_plan_step_new(path, o, &s, &err);
    ck_assert_msg(m, "%s", err.msg);
    mp_plan_info info;
    ck_assert_msg(!mp_plan_write(dir, path, o, m->graph, &s, -1, &info, &err), "%s", err.msg);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    ck_assert_msg(!mp_plan_load(dir, p, &err), "%s", err.msg);
    mp_plan_exec *pe = mp_plan_exec_new(p, ro, &err);
    ck_assert_msg(pe, "%s", err.msg);
    return pe;
}

/* The store-everything plan of path's step run for nsteps from the model's
 * own weights (fp32 in the file), each step's loss in loss[]. */
static void steps_from_weights(const char *path, const mp_plan_opts *o, int nsteps, double *loss)
{
    mp_err err = {""};
    mp_plan p;
    mp_plan_run_opts ro = {.seed = SEED, .weights_from_model = true};
    mp_plan_exec *pe = store_everything_exec(path, o, &ro, &p);
    for (int i = 0; i < nsteps; i++) ck_assert_msg(!mp_plan_exec_step(pe, &loss[i], NULL, &err), "%s", err.msg);
    ck_assert_int_eq(mp_plan_exec_peak(pe), p.arena_bytes);
    mp_plan_exec_free(pe);
    mp_plan_free(&p);
}

/* A bf16/fp16 plan loads the file's fp32 weights as rounded working copies and
 * exact fp32 masters, so the updates of a few steps follow the fp32 plan's:
 * each step's loss within the loss tolerance (a master left seeded, or a
 * working copy not rounded from it, is off by several u within three steps). */
START_TEST(low_from_weights)
{
    static const mp_dtype low[] = {MP_BFLOAT16, MP_FLOAT16};
    enum { STEPS = 3 };
    mp_plan_opts o = opts(8, NULL, 0);
    double want[STEPS], got[STEPS];
    steps_from_weights(MODEL("mlp.onnx"), &o, STEPS, want);
    for (size_t k = 0; k < sizeof low / sizeof *low; k++) {
        steps_from_weights(MODEL("mlp.onnx"), (mp_plan_opts[]){at(o, low[k])}, STEPS, got);
        double u = low[k] == MP_BFLOAT16 ? BF16_U : FP16_U;
        for (int i = 0; i < STEPS; i++) {
            double rel = fabs(got[i] - want[i]) / fabs(want[i]);
            printf("  mlp.onnx weights from the file, %s step %d: loss %.6f, fp32 %.6f (%.1fu)\n",
                   mp_plan_precision_name(low[k]), i + 1, got[i], want[i], rel / u);
            ck_assert_msg(rel <= LOSS_RTOL(u), "%s step %d: loss %g, fp32 %g", mp_plan_precision_name(low[k]), i + 1, got[i], want[i]);
        }
        ck_assert_msg(want[STEPS - 1] < want[0] && got[STEPS - 1] < got[0], "the steps must lower the loss");
    }
}
END_TEST

/* fp16's dynamic loss scale (passes/loss_scale.c) on the store-everything
 * plan, seeded weights: cnn_bn's first steps overflow (its fp32 gradients
 * reach 2.07, times 2^15 past fp16's 65504), so each of them halves the scale
 * and changes no parameter, moment or step counter, until a step at a lower
 * scale is finite and updates; mlp's never overflow: the scale stays and the
 * good steps count. */
static double state_of(mp_plan_exec *pe, const char *name)
{
    int32_t v = mp_graph_find(mp_plan_exec_graph(pe), name);
    ck_assert_msg(v >= 0, "no state '%s'", name);
    const mp_tensor *t = mp_exec_value(mp_plan_exec_executor(pe), v);
    ck_assert(t && t->numel == 1);
    return mp_tensor_get_f64(t, 0);
}

/* A hash of every resident state but the loss scale's (parameters, masters, moments, steps). */
static uint64_t state_hash(mp_plan_exec *pe)
{
    const mp_graph *g = mp_plan_exec_graph(pe);
    uint64_t h = MP_PLAN_FNV_INIT;
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        if (val->producer >= 0 || (val->role != MP_ROLE_PARAM && val->role != MP_ROLE_OPT_STATE) ||
            !strncmp(val->name, "loss_scale.", 11))
            continue;
        const mp_tensor *t = mp_exec_value(mp_plan_exec_executor(pe), v);
        if (t && t->data) h = mp_plan_fnv1a(h, t->data, (size_t)t->numel * mp_elem_size(t->dtype));
    }
    return h;
}

static void loss_scale_run(const char *path, mp_plan_opts o, int nsteps, bool overflows)
{
    mp_err err = {""};
    mp_plan p;
    mp_plan_run_opts ro = {.seed = SEED};
    mp_plan_exec *pe = store_everything_exec(path, &o, &ro, &p);
    int skipped = 0, updated = 0;
    for (int i = 0; i < nsteps; i++) {
        uint64_t before = state_hash(pe);
        double e = state_of(pe, "loss_scale.log2"), good = state_of(pe, "loss_scale.good_steps"), loss;
        ck_assert_msg(!mp_plan_exec_step(pe, &loss, NULL, &err), "%s", err.msg);
        ck_assert_msg(isfinite(loss), "step %d: loss %g", i + 1, loss);
        double e2 = state_of(pe, "loss_scale.log2"), good2 = state_of(pe, "loss_scale.good_steps");
        bool same = state_hash(pe) == before;
        if (e2 == e - 1) { /* overflow: halved, nothing else changed */
            ck_assert_msg(same && good2 == 0, "step %d: the scale halved but the state changed", i + 1);
            ck_assert_msg(!updated, "step %d: overflow after a finite step", i + 1);
            skipped++;
        } else { /* finite: updated at this scale, one more good step */
            ck_assert_msg(e2 == e && good2 == good + 1 && !same, "step %d: log2 %g -> %g, good %g -> %g, %s", i + 1, e,
                          e2, good, good2, same ? "no update" : "updated");
            updated++;
        }
        printf("  %-24s fp16 step %d: loss %.6f, scale 2^%g -> 2^%g, %s\n", strrchr(path, '/') + 1, i + 1, loss,
               15 + e, 15 + e2, same ? "skipped (not finite)" : "updated");
    }
    ck_assert_msg(overflows ? skipped > 0 && updated > 0 : skipped == 0, "%d steps skipped, %d updated", skipped, updated);
    ck_assert_int_eq(mp_plan_exec_peak(pe), p.arena_bytes);
    mp_plan_exec_free(pe);
    mp_plan_free(&p);
}

START_TEST(fp16_loss_scale)
{
    loss_scale_run(MODEL("cnn_bn.onnx"), at(opts(2, NULL, 0), MP_FLOAT16), 6, true);
    loss_scale_run(MODEL("mlp.onnx"), at(opts(8, NULL, 0), MP_FLOAT16), 3, false);
}
END_TEST

/* ---- corrupted plans ---- */

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    char *s = malloc(*n + 1);
    ck_assert(fread(s, 1, *n, f) == *n);
    s[*n] = 0;
    fclose(f);
    return s;
}

static void spill(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert(f && fwrite(s, 1, n, f) == n);
    fclose(f);
}

/* Writes text with its first `from` replaced by `to` and expects loading or
 * preparing the plan to fail with a message containing `want`. */
static void expect_reject(const char *text, const char *from, const char *to, size_t cut, const char *want)
{
    char path[300];
    snprintf(path, sizeof path, "%s/plan.json", dir);
    const char *at = strstr(text, from);
    ck_assert_msg(at, "no '%s' in the plan", from);
    size_t n = strlen(text), pre = (size_t)(at - text);
    char *s = malloc(n + strlen(to) + 1);
    memcpy(s, text, pre);
    strcpy(s + pre, to);
    strcat(s, at + strlen(from));
    spill(path, s, cut ? cut : strlen(s));
    free(s);
    mp_err err = {""};
    mp_plan p;
    mp_plan_run_opts ro = {.seed = SEED};
    int rc = mp_plan_load(dir, &p, &err);
    if (!rc) {
        mp_plan_exec *pe = mp_plan_exec_new(&p, &ro, &err);
        rc = pe ? 0 : -1;
        mp_plan_exec_free(pe);
        mp_plan_free(&p);
    }
    ck_assert_msg(rc, "a plan with '%s' -> '%s' was accepted", from, to);
    ck_assert_msg(strstr(err.msg, want), "expected '%s' in: %s", want, err.msg);
    printf("  rejected (%s): %s\n", want, err.msg);
}

/* ---- CUDA codegen ---- */

#define NVCC "/usr/local/cuda/bin/nvcc"

/* The store-everything order of path's step, emitted with plan.cu. */
static int emit_identity(const char *path, const mp_plan_opts *o, mp_err *err)
{
    mp_schedule s;
    mp_model *m = mp_plan_step_new(path, o, &s, err);
    ck_assert_msg(m, "%s", err->msg);
    mp_rsched rs = {.n = s.n, .node = calloc((size_t)s.n, sizeof *rs.node), .recompute = calloc((size_t)s.n, 1)};
    for (int32_t i = 0; i < s.n; i++) rs.node[i] = i;
    mp_plan_info info;
    int rc = mp_plan_emit(dir, path, o, &rs, -1, true, &info, err);
    mp_rsched_free(&rs);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    return rc;
}

START_TEST(cuda_codegen)
{
    mp_err err = {""};
    char cmd[1024], f[300];
    /* an op without a CUDA kernel fails codegen by name, and writes no plan.cu */
    snprintf(f, sizeof f, "%s/plan.cu", dir);
    remove(f);
    char tanh_mlp[320]; /* Gemm -> Tanh -> Gemm: the CUDA runtime has no bf16 Tanh */
    snprintf(tanh_mlp, sizeof tanh_mlp, "%s/tanh_mlp.onnx", dir);
    mp_ob *b = mp_ob_new("main_graph");
    const char *h = mp_ob_input(b, "input", MP_FLOAT, 2, (const char *[]){"batch", "16"});
    const char *fc1[2] = {h, mp_ob_param_uniform(b, "fc1.weight", 2, (int64_t[]){16, 16}, 0.25f)};
    h = mp_ob_op(b, "MatMul", 2, fc1);
    h = mp_ob_op(b, "Tanh", 1, &h);
    const char *fc2[2] = {h, mp_ob_param_uniform(b, "fc2.weight", 2, (int64_t[]){16, 10}, 0.25f)};
    h = mp_ob_op(b, "MatMul", 2, fc2);
    mp_ob_output(b, h, "logits", MP_FLOAT, 2, (const char *[]){"batch", "10"});
    ck_assert_msg(mp_ob_write(b, tanh_mlp, &err) > 0, "%s: %s", tanh_mlp, err.msg);
    mp_ob_free(b);
    mp_plan_opts g = opts(8, NULL, 0);
    g.precision = MP_BFLOAT16;
    ck_assert_int_ne(emit_identity(tanh_mlp, &g, &err), 0);
    ck_assert_msg(strstr(err.msg, "plan.cu: op Tanh") && strstr(err.msg, "(node '"), "%s", err.msg);
    ck_assert_int_ne(access(f, F_OK), 0);
    printf("  refused: %s\n", err.msg);
    /* the MLP compiles and links */
    mp_plan_opts o = opts(8, NULL, 0);
    ck_assert_msg(!emit_identity(MODEL("mlp.onnx"), &o, &err), "%s", err.msg);
    ck_assert_int_eq(access(f, R_OK), 0);
    if (access(NVCC, X_OK)) {
        printf("  skipped: %s is absent, plan.cu not compiled\n", NVCC);
        return;
    }
    snprintf(cmd, sizeof cmd, "make -s -C %s NVCC=%s NVCCFLAGS='-O2 -Werror all-warnings' >%s/make.log 2>&1", dir, NVCC, dir);
    int rc = system(cmd);
    snprintf(f, sizeof f, "%s/make.log", dir);
    size_t n = 0;
    char *log = access(f, R_OK) ? NULL : slurp(f, &n);
    ck_assert_msg(rc == 0, "nvcc failed: %s", log ? log : "");
    free(log);
    snprintf(f, sizeof f, "%s/plan", dir);
    ck_assert_int_eq(access(f, X_OK), 0);
    printf("  plan.cu for mlp.onnx compiled and linked with nvcc (not run: no GPU here)\n");
    static const char *const made[] = {"plan", "plan.cu", "Makefile", "make.log"};
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
        snprintf(f, sizeof f, "%s/%s", dir, made[i]);
        remove(f);
    }
}
END_TEST

START_TEST(corrupted)
{
    mp_err err = {""};
    mp_plan_opts o = opts(8, NULL, 0);
    mp_schedule s;
    mp_model *m = mp_plan_step_new(MODEL("mlp.onnx"), &o, &s, &err);
    ck_assert_msg(m, "%s", err.msg);
    mp_plan_info info;
    ck_assert_msg(!mp_plan_write(dir, MODEL("mlp.onnx"), &o, m->graph, &s, -1, &info, &err), "%s", err.msg);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    char path[300];
    snprintf(path, sizeof path, "%s/plan.json", dir);
    size_t n;
    char *text = slurp(path, &n);
    expect_reject(text, "\"version\": 1", "\"version\": 2", 0, "plan version 2 is not supported");
    expect_reject(text, "\"fingerprint\": \"", "\"fingerprint\": \"f", 0, "fingerprint");
    expect_reject(text, "\"batch\": 8", "\"batch\": 4", 0, "fingerprint");
    /* the first tensor's size, halved: the loader compares it with the model */
    const char *b = strstr(strstr(text, "\"tensors\""), "\"bytes\": ");
    long long bytes = atoll(b + 9);
    char from[64], to[64];
    snprintf(from, sizeof from, "\"bytes\": %lld,", bytes);
    snprintf(to, sizeof to, "\"bytes\": %lld,", bytes / 2);
    expect_reject(text, from, to, 0, "bytes in the plan");
    expect_reject(text, "", "", n / 2, "plan.json");
    expect_reject(text, "\"format\": \"memplan-plan\"", "\"format\": \"other\"", 0, "not a memplan plan");
    free(text);
    /* a model that changed after planning */
    char copy[300];
    snprintf(copy, sizeof copy, "%s/model.onnx", dir);
    char *model = slurp(MODEL("mlp.onnx"), &n);
    spill(copy, model, n);
    m = mp_plan_step_new(copy, &o, &s, &err);
    ck_assert_msg(m, "%s", err.msg);
    ck_assert_msg(!mp_plan_write(dir, copy, &o, m->graph, &s, -1, &info, &err), "%s", err.msg);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    model[n - 1] ^= 1; /* one bit of the last weight */
    spill(copy, model, n);
    free(model);
    text = slurp(path, &n);
    expect_reject(text, "", "", 0, "changed since planning");
    free(text);
    remove(copy);
}
END_TEST

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/mp_plan_test_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    Suite *s = suite_create("plan_run");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, corrupted);
    tcase_add_test(tc, cuda_codegen);
    tcase_add_test(tc, mlp);
    tcase_add_test(tc, cnn_bn);
    tcase_add_test(tc, mnist);
    tcase_add_test(tc, gpt_decoder);
    tcase_add_test(tc, sliced_weight_views);
    tcase_add_test(tc, optimizer_in_backward);
    tcase_add_test(tc, mlp_low);
    tcase_add_test(tc, cnn_bn_low);
    tcase_add_test(tc, gpt_decoder_low);
    tcase_add_test(tc, mnist_low);
    tcase_add_test(tc, low_from_weights);
    tcase_add_test(tc, fp16_loss_scale);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char path[300];
    snprintf(path, sizeof path, "%s/plan.json", dir);
    remove(path);
    rmdir(dir);
    return failed ? 1 : 0;
}
