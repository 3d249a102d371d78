/* test_train.c - the training step (passes/train.h) on the project's models
 * and PyTorch's ResNet-50: parameter counts, one gradient per parameter of
 * its shape, optimizer state sizes, roles and phases on everything, and an
 * error naming the node for an op without a gradient rule. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "codegen/plan.h"
#include "passes/memory.h"
#include "passes/schedule.h"
#include "passes/autodiff.h" /* ad_attr_int */
#include "passes/train.h"
#include "runtime/exec.h"
#include "fd_check.h" /* defines: fd_compare */

typedef struct step {
    mp_model *m;
    mp_graph *g;
    int64_t param_elems, param_bytes, state_bytes, nparams, ngrads;
} step;

/* Loads, binds (dims as NAME=VALUE pairs), infers and builds the step; rc of mp_train_build. */
static int build(step *s, const char *path, const mp_train_opts *o, int nd, const char **names, const int64_t *vals,
                 mp_err *err)
{
    memset(s, 0, sizeof *s);
    s->m = mp_onnx_load(path, err);
    ck_assert_msg(s->m, "%s: %s", path, err->msg);
    s->g = s->m->graph;
    mp_bindings b = {.batch = -1, .nnamed = nd, .names = names, .values = vals};
    ck_assert_msg(!mp_bind_dims(s->g, &b, err), "%s", err->msg);
    ck_assert_msg(!mp_infer(s->g, err), "%s", err->msg);
    int rc = mp_train_build(s->g, o, err);
    if (rc) return rc;
    for (int32_t i = 0; i < s->g->nvalues; i++) {
        const mp_value *v = &s->g->values[i];
        if (v->role == MP_ROLE_PARAM && v->alias < 0) {
            s->nparams++;
            s->param_elems += mp_value_numel(v);
            s->param_bytes += v->bytes;
        }
        if (v->role == MP_ROLE_OPT_STATE && v->alias < 0) s->state_bytes += v->bytes;
        s->ngrads += v->role == MP_ROLE_GRAD;
    }
    return 0;
}

/* Every value has a role and known bytes, every node a phase; the optimizer
 * updates each parameter once, from a GRAD value of its own shape, in place. */
static void check_step(const step *s)
{
    mp_graph *g = s->g;
    int *updates = calloc((size_t)g->nvalues, sizeof *updates);
    for (int32_t i = 0; i < g->nvalues; i++) {
        const mp_value *v = &g->values[i];
        ck_assert_msg(v->role > MP_ROLE_NONE && v->role < MP_ROLE_COUNT, "value '%s' has no role", v->name);
        if (v->kind == MP_KIND_TENSOR && v->dtype != MP_STRING &&
            (v->ncons || v->producer >= 0 || v->role != MP_ROLE_ACTIVATION))
            ck_assert_msg(v->bytes >= 0, "value '%s' has unknown bytes", v->name);
    }
    int nopt = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        ck_assert_int_lt(n->phase, MP_PHASE_COUNT);
        ck_assert_msg(n->op >= 0, "node '%s' not inferred", n->name);
        if (n->phase != MP_PHASE_OPTIMIZER || strcmp(n->domain, "memplan")) continue;
        nopt++;
        const mp_value *p = &g->values[n->in[0]], *gr = &g->values[n->in[1]];
        ck_assert_int_eq(p->role, MP_ROLE_PARAM);
        ck_assert_msg(gr->role == MP_ROLE_GRAD, "'%s' (gradient of '%s') has role %d", gr->name, p->name, gr->role);
        ck_assert_int_eq(gr->rank, p->rank);
        for (int k = 0; k < p->rank; k++) ck_assert_int_eq(gr->dims[k].v, p->dims[k].v);
        ck_assert_int_eq(g->values[n->out[0]].alias, n->in[0]);
        updates[n->in[0]]++;
    }
    ck_assert_int_eq(nopt, s->nparams);
    for (int32_t i = 0; i < g->nvalues; i++)
        if (g->values[i].role == MP_ROLE_PARAM && g->values[i].alias < 0)
            ck_assert_msg(updates[i] == 1, "parameter '%s' updated %d times", g->values[i].name, updates[i]);
    free(updates);
}

static void close_step(step *s) { mp_onnx_close(s->m); }

#define MODEL(f) MEMPLAN_SOURCE "/models/" f

START_TEST(mlp_adamw)
{
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(!build(&s, MODEL("mlp.onnx"), &o, 1, (const char *[]){"batch"}, (int64_t[]){4}, &err), "%s", err.msg);
    ck_assert_int_eq(s.param_elems, 235146);
    ck_assert_int_eq(s.nparams, 6);
    ck_assert_int_eq(s.ngrads, 6);
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes + 4 * s.nparams); /* moments + step counters */
    int32_t labels = mp_graph_find(s.g, "labels");
    ck_assert_int_ge(labels, 0);
    ck_assert_int_eq(s.g->values[labels].dtype, MP_INT64);
    ck_assert_int_eq(s.g->values[labels].role, MP_ROLE_INPUT);
    check_step(&s);
    /* the first layer's input is saved (its weight gradient reads it); the loss is not */
    ck_assert(mp_value_is_saved(s.g, mp_graph_find(s.g, "input")));
    close_step(&s);
}
END_TEST

START_TEST(mlp_optimizers)
{
    static const mp_opt_kind kinds[] = {MP_OPT_SGD, MP_OPT_MOMENTUM, MP_OPT_ADAM, MP_OPT_ADAFACTOR};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        step s;
        mp_err err;
        mp_train_opts o = mp_train_defaults();
        o.optimizer = kinds[k];
        o.loss = MP_LOSS_MSE;
        ck_assert_msg(!build(&s, MODEL("mlp.onnx"), &o, 1, (const char *[]){"batch"}, (int64_t[]){4}, &err), "%s",
                      err.msg);
        check_step(&s);
        ck_assert_int_ge(mp_graph_find(s.g, "target"), 0);
        if (kinds[k] == MP_OPT_SGD) ck_assert_int_eq(s.state_bytes, 0);
        if (kinds[k] == MP_OPT_MOMENTUM) ck_assert_int_eq(s.state_bytes, s.param_bytes);
        if (kinds[k] == MP_OPT_ADAM) ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes + 4 * s.nparams);
        /* factored: W1 [256,784] keeps 256 + 784 floats; biases keep full moments */
        if (kinds[k] == MP_OPT_ADAFACTOR) {
            ck_assert_int_gt(s.state_bytes, 0);
            ck_assert_int_lt(s.state_bytes, s.param_bytes / 20);
        }
        close_step(&s);
    }
}
END_TEST

START_TEST(mlp_micro_batches)
{
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    o.micro_batches = 4;
    ck_assert_msg(!build(&s, MODEL("mlp.onnx"), &o, 1, (const char *[]){"batch"}, (int64_t[]){4}, &err), "%s", err.msg);
    check_step(&s);
    ck_assert_int_eq(s.ngrads, 2 * 6); /* accumulation buffer and its in-place update */
    int aliased = 0;
    for (int32_t i = 0; i < s.g->nvalues; i++)
        aliased += s.g->values[i].role == MP_ROLE_GRAD && s.g->values[i].alias >= 0;
    ck_assert_int_eq(aliased, 6);
    close_step(&s);
}
END_TEST

/* bf16 / fp16: low-precision parameters and gradients, fp32 masters and moments. */
START_TEST(mixed_precision)
{
    static const mp_dtype lows[] = {MP_BFLOAT16, MP_FLOAT16};
    static const char *const files[] = {MODEL("mlp.onnx"), MODEL("gpt_decoder.onnx")};
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 2; k++) {
            step s;
            mp_err err;
            mp_train_opts o = mp_train_defaults();
            o.precision = lows[k];
            ck_assert_msg(
                !build(&s, files[f], &o, f ? 2 : 1, (const char *[]){"batch", "sequence"}, (int64_t[]){2, 16}, &err),
                "%s: %s", files[f], err.msg);
            ck_assert_int_eq(s.param_bytes, 2 * s.param_elems);
            /* master, moments, steps; fp16: the loss scale's exponent and good-step count */
            ck_assert_int_eq(s.state_bytes, 3 * 4 * s.param_elems + 4 * s.nparams + (lows[k] == MP_FLOAT16 ? 8 : 0));
            for (int32_t i = 0; i < s.g->nvalues; i++) {
                const mp_value *v = &s.g->values[i];
                if (v->role == MP_ROLE_GRAD || v->role == MP_ROLE_PARAM) ck_assert_int_eq(v->dtype, lows[k]);
                if (v->role == MP_ROLE_OPT_STATE) ck_assert_int_eq(v->dtype, MP_FLOAT);
                ck_assert_int_ge(v->bytes, v->kind == MP_KIND_TENSOR && (v->producer >= 0 || v->ncons) ? 0 : -1);
            }
            /* fp16 only: one seed from the scale, one check of every gradient that each update reads, one
             * update of the scale, after the others */
            int seeds = 0, checks = 0, rescale = 0, updates = 0, reading = 0, finite = -1, after = 0;
            for (int32_t i = 0; i < s.g->nnodes; i++) {
                const mp_node *n = &s.g->nodes[i];
                seeds += !strcmp(n->op_type, "LossScale");
                if (!strcmp(n->op_type, "AllFinite")) {
                    checks++, finite = n->out[0];
                    ck_assert_int_eq(n->nin, s.nparams);
                }
                if (!strcmp(n->op_type, "LossScaleUpdate")) rescale++, after = updates;
                if (!strcmp(n->op_type, "AdamUpdate")) updates++, reading += n->in[n->nin - 2] == finite;
            }
            int want = lows[k] == MP_FLOAT16;
            ck_assert(seeds == want && checks == want && rescale == want);
            ck_assert_int_eq(reading, want ? updates : 0);
            ck_assert_int_eq(after, want ? s.nparams : 0);
            close_step(&s);
        }
}
END_TEST

START_TEST(cnn_bn)
{
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(!build(&s, MODEL("cnn_bn.onnx"), &o, 1, (const char *[]){"batch"}, (int64_t[]){2}, &err), "%s",
                  err.msg);
    ck_assert_int_eq(s.param_elems, 25626); /* running stats are buffers */
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes + 4 * s.nparams); /* moments + step counters */
    int buffers = 0;
    for (int32_t i = 0; i < s.g->nvalues; i++) buffers += s.g->values[i].role == MP_ROLE_BUFFER;
    ck_assert_int_eq(buffers, 4);
    check_step(&s);
    close_step(&s);
}
END_TEST

/* models/gpt_decoder.onnx's step at batch 2, sequence 16, AdamW. */
static void build_gpt_decoder(step *s)
{
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(
        !build(s, MODEL("gpt_decoder.onnx"), &o, 2, (const char *[]){"batch", "sequence"}, (int64_t[]){2, 16}, &err),
        "%s", err.msg);
}

START_TEST(gpt_decoder)
{
    step s;
    build_gpt_decoder(&s);
    ck_assert_int_eq(s.param_elems, 141056);
    ck_assert_int_eq(s.ngrads, s.nparams);
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes + 4 * s.nparams); /* moments + step counters */
    int32_t labels = mp_graph_find(s.g, "labels");
    ck_assert_int_ge(labels, 0);
    ck_assert_int_eq(s.g->values[labels].rank, 2);
    /* residual streams: gradient sums of activations accumulate in place */
    int inplace = 0;
    for (int32_t i = 0; i < s.g->nnodes; i++) {
        const mp_node *n = &s.g->nodes[i];
        if (n->phase != MP_PHASE_BACKWARD || strcmp(n->op_type, "Add") || s.g->values[n->out[0]].alias < 0) continue;
        const mp_value *out = &s.g->values[n->out[0]], *old = &s.g->values[out->alias];
        ck_assert_int_eq(out->alias, n->in[0]);
        ck_assert_int_eq(out->bytes, old->bytes);
        ck_assert_int_eq(old->ncons, 1); /* the sum is its only reader */
        inplace++;
    }
    ck_assert_int_gt(inplace, 0);
    check_step(&s);
    close_step(&s);
}
END_TEST

static int32_t storage(const mp_graph *g, int32_t v)
{
    while (g->values[v].alias >= 0) v = g->values[v].alias;
    return v;
}

static int32_t find_node(const mp_graph *g, const char *name)
{
    for (int32_t i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    ck_abort_msg("no node '%s'", name);
    return -1;
}

/* The peak of g's step in graph order, and the gradients' bytes live at it. */
static int64_t step_peak(const mp_graph *g, int64_t *grads_at_peak)
{
    mp_err err = {""};
    mp_schedule sc;
    mp_memory mem;
    ck_assert_msg(!mp_schedule_graph_order(g, &sc, &err) && !mp_memory_analyze(g, &sc, &mem, &err), "%s", err.msg);
    int64_t peak = mem.peak_bytes;
    *grads_at_peak = mem.at_peak[MP_MEM_GRADS];
    mp_memory_free(&mem);
    mp_schedule_free(&sc);
    return peak;
}

/* --optimizer-in-backward (mp_graph_hoist_phase): the same nodes, each update
 * right after the last node it must follow (the producers of what it reads,
 * and every earlier node touching its parameter's or state's buffer), before
 * the backward ends when its layer's gradient is done early; the other nodes
 * in their order. The gradients then die at their updates: a lower peak. */
START_TEST(optimizer_in_backward)
{
    step a, b;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    const char *names[] = {"batch", "sequence"};
    const int64_t vals[] = {2, 16};
    ck_assert_msg(!build(&a, MODEL("gpt_decoder.onnx"), &o, 2, names, vals, &err), "%s", err.msg);
    o.optimizer_in_backward = true;
    ck_assert_msg(!build(&b, MODEL("gpt_decoder.onnx"), &o, 2, names, vals, &err), "%s", err.msg);
    check_step(&b);
    mp_graph *ga = a.g, *gb = b.g;
    ck_assert_int_eq(ga->nnodes, gb->nnodes);
    mp_schedule sc;
    ck_assert_msg(!mp_schedule_graph_order(gb, &sc, &err) && !mp_schedule_check(gb, &sc, &err), "%s", err.msg);
    mp_schedule_free(&sc);
    int32_t last_backward = -1, early = 0, prev = -1;
    for (int32_t i = 0; i < gb->nnodes; i++)
        if (gb->nodes[i].phase == MP_PHASE_BACKWARD) last_backward = i;
    for (int32_t i = 0; i < gb->nnodes; i++) {
        const mp_node *n = &gb->nodes[i];
        if (n->phase != MP_PHASE_OPTIMIZER) { /* the others keep their order */
            int32_t j = find_node(ga, n->name);
            ck_assert_msg(j > prev, "node '%s' moved", n->name);
            prev = j;
            continue;
        }
        early += i < last_backward;
        int32_t must = -1; /* the last node it must follow */
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k] < 0) continue;
            const mp_value *v = &gb->values[n->in[k]];
            if (v->producer > must) must = v->producer;
            int32_t r = storage(gb, n->in[k]);
            for (int32_t j = 0; j < i; j++) /* every earlier reader of the buffer it writes */
                for (int kk = 0; kk < gb->nodes[j].nin; kk++)
                    if (gb->nodes[j].in[kk] >= 0 && storage(gb, gb->nodes[j].in[kk]) == r && j > must) must = j;
        }
        ck_assert_msg(must < i, "update '%s' runs before a node it must follow", n->name);
        /* as early as it may: nothing between that node and it but other updates */
        for (int32_t j = must + 1; j < i; j++) ck_assert_int_eq(gb->nodes[j].phase, MP_PHASE_OPTIMIZER);
        /* and after every node of the default order that touched its parameter's buffer */
        int32_t pa = find_node(ga, n->name);
        for (int32_t j = 0; j < ga->nnodes; j++) {
            if (j >= pa) continue;
            for (int kk = 0; kk < ga->nodes[j].nin; kk++)
                if (ga->nodes[j].in[kk] >= 0 && storage(ga, ga->nodes[j].in[kk]) == storage(ga, ga->nodes[pa].in[0]))
                    ck_assert_msg(find_node(gb, ga->nodes[j].name) < i, "'%s' reads '%s' after its update",
                                  ga->nodes[j].name, ga->values[ga->nodes[pa].in[0]].name);
        }
    }
    ck_assert_int_gt(early, 0);
    int64_t ga_grads, gb_grads, pa = step_peak(ga, &ga_grads), pb = step_peak(gb, &gb_grads);
    printf("  gpt_decoder optimizer in the backward: %d of the updates before the backward ends; peak %lld -> %lld "
           "bytes, gradients at the peak %lld -> %lld\n", early, (long long)pa, (long long)pb, (long long)ga_grads,
           (long long)gb_grads);
    ck_assert_int_lt(pb, pa);
    ck_assert_int_lt(gb_grads, ga_grads);
    close_step(&a);
    close_step(&b);

    /* fp16: every update reads AllFinite over all the gradients, so none can move before the last one is made */
    o.precision = MP_FLOAT16;
    ck_assert_msg(!build(&b, MODEL("gpt_decoder.onnx"), &o, 2, names, vals, &err), "%s", err.msg);
    int32_t all_finite = -1;
    for (int32_t i = 0; i < b.g->nnodes; i++)
        if (!strcmp(b.g->nodes[i].op_type, "AllFinite")) all_finite = i;
    ck_assert_int_ge(all_finite, 0);
    for (int32_t i = 0; i < b.g->nnodes; i++) {
        const mp_node *n = &b.g->nodes[i];
        if (n->phase == MP_PHASE_OPTIMIZER && !strcmp(n->domain, "memplan") && strcmp(n->op_type, "AllFinite") &&
            strcmp(n->op_type, "Cast"))
            ck_assert_msg(i > all_finite, "'%s' runs before the gradient check", n->name);
    }
    close_step(&b);
}
END_TEST

static int32_t node_of(const mp_graph *g, const char *op)
{
    for (int32_t i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i].op_type, op)) return i;
    return -1;
}

/* The loss and the softmax gradients write over inputs that die there; the
 * model's logits join them once the step stops returning them (the plan's
 * step), and the backward reshape of the logits' gradient is a view. */
START_TEST(loss_in_place)
{
    step s;
    mp_err err;
    build_gpt_decoder(&s);
    mp_graph *g = s.g;
    int32_t loss = node_of(g, "SoftmaxCrossEntropyLoss"), grad = node_of(g, "SoftmaxCrossEntropyGrad");
    ck_assert_int_ge(loss, 0);
    ck_assert_int_ge(grad, 0);
    int32_t scores = g->nodes[loss].in[0], log_prob = g->nodes[loss].out[1], dscores = g->nodes[grad].out[0];
    int32_t logits = g->outputs[0];
    ck_assert_int_eq(g->nodes[grad].in[1], log_prob);
    ck_assert_int_eq(g->values[dscores].alias, log_prob);      /* log_prob dies in its gradient */
    ck_assert_int_eq(g->values[scores].alias, logits);         /* the loss's reshape is a view */
    ck_assert_int_eq(g->values[log_prob].alias, -1);           /* the step returns the logits: kept */
    int softmax_grads = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (strcmp(n->op_type, "SoftmaxGrad")) continue;
        softmax_grads++;
        ck_assert_int_eq(g->values[n->out[0]].alias, n->in[0]); /* dX over dY, never over the saved Y */
        ck_assert_int_eq(g->values[n->in[0]].ncons, 1);
    }
    ck_assert_int_gt(softmax_grads, 0);
    check_step(&s);

    int64_t peak_kept = -1;
    mp_schedule sc;
    mp_memory mem;
    ck_assert_msg(!mp_schedule_graph_order(g, &sc, &err) && !mp_memory_analyze(g, &sc, &mem, &err), "%s", err.msg);
    peak_kept = mem.peak_bytes;
    mp_memory_free(&mem);
    ck_assert_msg(!mp_plan_step_outputs(g, &err), "%s", err.msg);
    ck_assert_int_eq(g->values[log_prob].alias, scores); /* now the logits die in the loss */
    ck_assert_int_eq(storage(g, dscores), logits);
    /* the gradient of the loss's reshape reads dScores' buffer as a view */
    bool view = false;
    for (int32_t c = 0; c < g->values[dscores].ncons; c++) {
        const mp_node *n = &g->nodes[g->values[dscores].cons[c]];
        if (!strcmp(n->op_type, "Reshape") && n->phase == MP_PHASE_BACKWARD)
            view = g->values[n->out[0]].alias == dscores;
    }
    ck_assert(view);
    ck_assert_msg(!mp_memory_analyze(g, &sc, &mem, &err), "%s", err.msg);
    ck_assert_int_lt(mem.peak_bytes, peak_kept);
    mp_memory_free(&mem);
    mp_schedule_free(&sc);
    close_step(&s);
}
END_TEST

START_TEST(resnet50)
{
    const char *path = MEMPLAN_SHARED "/models/torch/resnet50_train.onnx";
    if (access(path, R_OK)) {
        printf("skip: %s absent\n", path);
        return;
    }
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(!build(&s, path, &o, 1, (const char *[]){"batch"}, (int64_t[]){2}, &err), "%s", err.msg);
    ck_assert_int_eq(s.param_elems, 25557032);
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes + 4 * s.nparams); /* moments + step counters */
    check_step(&s);
    close_step(&s);
}
END_TEST

/* The other PyTorch train exports: every op on their paths has a rule, and the
 * parameter counts are PyTorch's (../shared/models/torch/README.md). */
START_TEST(torch_zoo)
{
    static const struct {
        const char *file;
        int64_t params;
        int ndims;
    } zoo[] = {
        {"vgg16_train.onnx", 138357544, 1},
        {"mobilenet_v3_large_train.onnx", 5483032, 1},
        {"vit_b_16_train.onnx", 86567656, 1},
        {"gpt2_small_like_train.onnx", 163037184, 2},
    };
    for (size_t i = 0; i < sizeof zoo / sizeof *zoo; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/models/torch/%s", MEMPLAN_SHARED, zoo[i].file);
        if (access(path, R_OK)) {
            printf("skip: %s absent\n", path);
            continue;
        }
        step s;
        mp_err err;
        mp_train_opts o = mp_train_defaults();
        ck_assert_msg(
            !build(&s, path, &o, zoo[i].ndims, (const char *[]){"batch", "sequence"}, (int64_t[]){2, 16}, &err),
            "%s: %s", zoo[i].file, err.msg);
        ck_assert_int_eq(s.param_elems, zoo[i].params);
        ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes + 4 * s.nparams); /* moments + step counters */
        check_step(&s);
        close_step(&s);
    }
}
END_TEST

/* x [2, 3] (input) times W [2, 3] (parameter) into *xw; *y the graph's output,
 * named `out`, for the caller's node; with `extra`, an int64 [4] graph input of
 * that name too (*extra_id). Link and infer after adding the node. */
static mp_graph *xw_graph(const char *out, int32_t *xw, int32_t *y, const char *extra, int32_t *extra_id)
{
    mp_graph *g = mp_graph_new(NULL);
    mp_dim d[2] = {mp_dim_of(2), mp_dim_of(3)}, d4[1] = {mp_dim_of(4)};
    int32_t x = mp_graph_add_value(g, "x"), w = mp_graph_add_value(g, "W");
    *xw = mp_graph_add_value(g, "xw"), *y = mp_graph_add_value(g, out);
    mp_value_set(g, x, MP_FLOAT, 2, d);
    mp_value_set(g, w, MP_FLOAT, 2, d);
    g->values[x].flags = MP_VAL_INPUT;
    g->values[w].flags = MP_VAL_INITIALIZER;
    g->values[*y].flags = MP_VAL_OUTPUT;
    int32_t *ins = mp_arena_alloc(g->arena, 2 * sizeof *ins), *inits = mp_arena_alloc(g->arena, sizeof *inits);
    int32_t *outs = mp_arena_alloc(g->arena, sizeof *outs);
    ins[0] = x, inits[0] = w, outs[0] = *y;
    g->inputs = ins, g->ninputs = 1, g->inits = inits, g->ninits = 1, g->outputs = outs, g->noutputs = 1;
    if (extra) {
        *extra_id = ins[g->ninputs++] = mp_graph_add_value(g, extra);
        mp_value_set(g, *extra_id, MP_INT64, 1, d4);
        g->values[*extra_id].flags = MP_VAL_INPUT;
    }
    mp_graph_add_node(g, "mul", "Mul", "", 2, (int32_t[]){x, w}, 1, xw);
    return g;
}

/* Builds the step of g with loss `kind`; it must fail with a message holding a and b. */
static void build_fails(mp_graph *g, mp_loss_kind kind, const char *a, const char *b)
{
    mp_err err;
    ck_assert_msg(!mp_graph_link(g, &err), "%s", err.msg);
    ck_assert_msg(!mp_infer(g, &err), "%s", err.msg);
    mp_train_opts o = mp_train_defaults();
    o.loss = kind;
    ck_assert_int_eq(mp_train_build(g, &o, &err), -1);
    ck_assert_msg(strstr(err.msg, a) && strstr(err.msg, b), "message: %s", err.msg);
}

/* y = Hardmax(x * W): Hardmax has no gradient rule and lies between W and the loss. */
START_TEST(no_rule_error)
{
    int32_t xw, y;
    mp_graph *g = xw_graph("y", &xw, &y, NULL, NULL);
    mp_graph_add_node(g, "the_hardmax", "Hardmax", "", 1, &xw, 1, &y);
    build_fails(g, MP_LOSS_SUM, "the_hardmax", "Hardmax");
    mp_graph_free(g);
}
END_TEST

/* A loss on an 8-bit float output is refused by name: the step's seed (1 in the
 * loss's dtype) has no encoding there (before, storing it recursed forever). */
START_TEST(fp8_loss_error)
{
    for (int k = 0; k < 2; k++) {
        int32_t xw, y;
        mp_graph *g = xw_graph("y8", &xw, &y, NULL, NULL);
        mp_node *cast = &g->nodes[mp_graph_add_node(g, "to_fp8", "Cast", "", 1, &xw, 1, &y)];
        ad_attr_int(g, cast, "to", MP_FLOAT8E4M3FN);
        build_fails(g, k ? MP_LOSS_SUM : MP_LOSS_AUTO, "'y8'", "float8e4m3fn");
        ck_assert_int_eq(g->values[y].dtype, MP_FLOAT8E4M3FN);
        mp_graph_free(g);
    }
}
END_TEST

/* An output whose shape depends on an input's values (Pad's pads from a graph
 * input) has no size: the step is refused naming the forward value and node. */
START_TEST(value_dependent_shape_error)
{
    int32_t xw, y, pads;
    mp_graph *g = xw_graph("padded", &xw, &y, "pads", &pads);
    mp_graph_add_node(g, "the_pad", "Pad", "", 2, (int32_t[]){xw, pads}, 1, &y);
    build_fails(g, MP_LOSS_MSE, "'padded' (from node 'the_pad'", "values known only when the model runs");
    mp_graph_free(g);
}
END_TEST

/* A float64 graph value: input, initializer or intermediate. */
static int32_t dvalue(mp_graph *g, const char *name, uint32_t flags, int rank, const int64_t *dims)
{
    int32_t v = mp_graph_add_value(g, name);
    mp_dim d[4];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    if (rank >= 0) mp_value_set(g, v, MP_DOUBLE, rank, d);
    g->values[v].flags = flags;
    return v;
}

/* Builds the step of g (one output) with loss `kind` and SGD, runs it on the
 * CPU executor in float64 with random inputs and weights, and compares every
 * parameter's gradient with central finite differences of the step's loss. */
static void fd_check(mp_graph *g, mp_loss_kind kind)
{
    mp_err err;
    ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s", err.msg);
    mp_train_opts o = mp_train_defaults();
    o.loss = kind;
    o.optimizer = MP_OPT_SGD;
    ck_assert_msg(!mp_train_build(g, &o, &err), "%s", err.msg);
    /* keep the loss and the gradients (the optimizer's inputs) after the run */
    int32_t *keep = mp_arena_alloc(g->arena, (size_t)(g->nnodes + 1) * sizeof *keep), nkeep = 1;
    int32_t *param = mp_arena_alloc(g->arena, (size_t)(g->nnodes + 1) * sizeof *param);
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (n->phase == MP_PHASE_LOSS) keep[0] = n->out[0];
        if (n->phase == MP_PHASE_OPTIMIZER) param[nkeep] = n->in[0], keep[nkeep++] = n->in[1];
    }
    g->outputs = keep, g->noutputs = nkeep;
    mp_exec *ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(ex, "%s", err.msg);
    uint64_t s = 12345;
    mp_tensor **data = mp_arena_alloc(g->arena, (size_t)g->nvalues * sizeof *data);
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        if (!(val->flags & (MP_VAL_INPUT | MP_VAL_INITIALIZER))) continue;
        int64_t dims[4];
        for (int i = 0; i < val->rank; i++) dims[i] = val->dims[i].v;
        data[v] = mp_tensor_new(g->arena, val->dtype, val->rank, dims); /* ints and bools: 0 or 1 */
        for (int64_t i = 0; i < data[v]->numel; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            mp_tensor_set_f64(data[v], i, (double)(s >> 11) / 9007199254740992.0 + 0.2); /* [0.2, 1.2): no kinks */
        }
        ck_assert_msg(!mp_exec_bind(ex, v, data[v], &err), "%s", err.msg);
    }
    ck_assert_msg(!mp_exec_run(ex, &err), "%s", err.msg);
    fd_compare(ex, g, keep, param, nkeep, data, "step", NULL);
    ck_assert_int_ge(nkeep, 2);
    mp_exec_free(ex);
}

static void set_io(mp_graph *g, int32_t in, int32_t out)
{
    g->inputs = mp_arena_dup(g->arena, &in, sizeof in), g->ninputs = 1;
    g->outputs = mp_arena_dup(g->arena, &out, sizeof out), g->noutputs = 1;
    g->values[out].flags |= MP_VAL_OUTPUT;
    int32_t *inits = mp_arena_alloc(g->arena, (size_t)g->nvalues * sizeof *inits);
    g->ninits = 0;
    for (int32_t v = 0; v < g->nvalues; v++)
        if (g->values[v].flags & MP_VAL_INITIALIZER) inits[g->ninits++] = v;
    g->inits = inits;
}

/* sum(Tanh(Relu(Gemm(x, W, b, transB=1)))): ReduceSum, Tanh, Relu, Gemm, bias SumToShape. */
START_TEST(finite_differences_gemm)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 2, (int64_t[]){3, 4});
    int32_t w = dvalue(g, "W", MP_VAL_INITIALIZER, 2, (int64_t[]){5, 4});
    int32_t b = dvalue(g, "b", MP_VAL_INITIALIZER, 1, (int64_t[]){5});
    int32_t h = dvalue(g, "h", 0, -1, NULL), r = dvalue(g, "r", 0, -1, NULL), y = dvalue(g, "y", 0, -1, NULL);
    int32_t gemm = mp_graph_add_node(g, "fc", "Gemm", "", 3, (int32_t[]){x, w, b}, 1, &h);
    mp_graph_add_node(g, "relu", "Relu", "", 1, &h, 1, &r);
    mp_graph_add_node(g, "tanh", "Tanh", "", 1, &r, 1, &y);
    mp_node *gn = &g->nodes[gemm];
    gn->attrs = mp_arena_alloc(g->arena, sizeof *gn->attrs);
    gn->attrs[0] = (mp_attr){.name = "transB", .type = MP_ATTR_INT, .i = 1};
    gn->nattrs = 1;
    set_io(g, x, y);
    fd_check(g, MP_LOSS_SUM);
    mp_graph_free(g);
}
END_TEST

/* mean((Sigmoid(Div(Mul(Sub(MatMul(x, W), c), s), t)) - target)^2), x [2, 3, 2], with broadcast
 * parameters W [2, 4], c [3, 4], s [4] and t [3, 1]: MatMul, Sub, Mul, Div, Sigmoid, SumToShape, ReduceMean. */
START_TEST(finite_differences_elementwise)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 3, (int64_t[]){2, 3, 2}); /* batched: W and c broadcast */
    int32_t w = dvalue(g, "W", MP_VAL_INITIALIZER, 2, (int64_t[]){2, 4});
    int32_t c = dvalue(g, "c", MP_VAL_INITIALIZER, 2, (int64_t[]){3, 4});
    int32_t sc = dvalue(g, "s", MP_VAL_INITIALIZER, 1, (int64_t[]){4});
    int32_t t = dvalue(g, "t", MP_VAL_INITIALIZER, 2, (int64_t[]){3, 1});
    int32_t m = dvalue(g, "m", 0, -1, NULL), d = dvalue(g, "d", 0, -1, NULL), p = dvalue(g, "p", 0, -1, NULL);
    int32_t q = dvalue(g, "q", 0, -1, NULL), y = dvalue(g, "y", 0, -1, NULL);
    mp_graph_add_node(g, "mm", "MatMul", "", 2, (int32_t[]){x, w}, 1, &m);
    mp_graph_add_node(g, "sub", "Sub", "", 2, (int32_t[]){m, c}, 1, &d);
    mp_graph_add_node(g, "mul", "Mul", "", 2, (int32_t[]){d, sc}, 1, &p);
    mp_graph_add_node(g, "div", "Div", "", 2, (int32_t[]){p, t}, 1, &q);
    mp_graph_add_node(g, "sig", "Sigmoid", "", 1, &q, 1, &y);
    set_io(g, x, y);
    fd_check(g, MP_LOSS_MSE);
    mp_graph_free(g);
}
END_TEST

/* A Constant node's output holding vals. */
static int32_t dconst(mp_graph *g, const char *name, mp_dtype t, int rank, const int64_t *dims, const double *vals)
{
    int32_t v = mp_graph_add_value(g, name);
    mp_tensor *te = mp_tensor_new(g->arena, t, rank, dims);
    for (int64_t i = 0; i < te->numel; i++) mp_tensor_set_f64(te, i, vals[i]);
    int32_t id = mp_graph_add_node(g, NULL, "Constant", "", 0, NULL, 1, &v);
    mp_node *n = &g->nodes[id];
    n->attrs = mp_arena_alloc(g->arena, sizeof *n->attrs);
    n->attrs[0] =
        (mp_attr){.name = "value", .type = MP_ATTR_TENSOR, .tensors = mp_arena_alloc(g->arena, sizeof(mp_tensor *))};
    n->attrs[0].tensors[0] = te;
    n->nattrs = 1;
    return v;
}

/* sum(Squeeze(Tanh(Unsqueeze(MatMul(x, W))))), axes as opset-13 inputs: Unsqueeze and Squeeze pass the gradient
 * back through the view with the inverse reshape. */
START_TEST(finite_differences_squeeze)
{
    mp_graph *g = mp_graph_new(NULL);
    g->opsets = mp_arena_alloc(g->arena, sizeof *g->opsets);
    g->opsets[0] = (mp_opset){"", 17};
    g->nopsets = 1;
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 2, (int64_t[]){3, 4});
    int32_t w = dvalue(g, "W", MP_VAL_INITIALIZER, 2, (int64_t[]){4, 5});
    int32_t axes = dconst(g, "axes", MP_INT64, 1, (int64_t[]){1}, (double[]){1});
    int32_t m = dvalue(g, "m", 0, -1, NULL), u = dvalue(g, "u", 0, -1, NULL), th = dvalue(g, "th", 0, -1, NULL);
    int32_t y = dvalue(g, "y", 0, -1, NULL);
    mp_graph_add_node(g, "mm", "MatMul", "", 2, (int32_t[]){x, w}, 1, &m);
    mp_graph_add_node(g, "unsq", "Unsqueeze", "", 2, (int32_t[]){m, axes}, 1, &u);
    mp_graph_add_node(g, "tanh", "Tanh", "", 1, &u, 1, &th);
    mp_graph_add_node(g, "sq", "Squeeze", "", 2, (int32_t[]){th, axes}, 1, &y);
    set_io(g, x, y);
    fd_check(g, MP_LOSS_SUM);
    mp_graph_free(g);
}
END_TEST

/* Cross-entropy of Reshape(Softmax(Transpose(Where(cond, Sqrt(Pow(Erf(m), 2) + c), m)))), m = MatMul(x, W):
 * Erf, Pow, Add, Sqrt, Where, a value with two consumers (m), Transpose, Softmax, Reshape,
 * SoftmaxCrossEntropyLoss with new int64 labels. */
START_TEST(finite_differences_xent)
{
    mp_graph *g = mp_graph_new(NULL);
    static mp_opset opset = {"", 17};
    g->opsets = &opset, g->nopsets = 1;
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 3, (int64_t[]){2, 3, 4});
    int32_t w = dvalue(g, "W", MP_VAL_INITIALIZER, 2, (int64_t[]){4, 4});
    int32_t c = dvalue(g, "c", MP_VAL_INITIALIZER, 1, (int64_t[]){4});
    int32_t cond = mp_graph_add_value(g, "cond");
    mp_value_set(g, cond, MP_BOOL, 2, (mp_dim[]){mp_dim_of(3), mp_dim_of(4)});
    g->values[cond].flags = MP_VAL_INPUT;
    int32_t two = dconst(g, "two", MP_DOUBLE, 0, NULL, (double[]){2.0});
    int32_t shape = dconst(g, "shape", MP_INT64, 1, (int64_t[]){2}, (double[]){8, 3});
    int32_t m = dvalue(g, "m", 0, -1, NULL), e = dvalue(g, "e", 0, -1, NULL), p = dvalue(g, "p", 0, -1, NULL);
    int32_t a = dvalue(g, "a", 0, -1, NULL), q = dvalue(g, "q", 0, -1, NULL), z = dvalue(g, "z", 0, -1, NULL);
    int32_t t = dvalue(g, "t", 0, -1, NULL), y = dvalue(g, "y", 0, -1, NULL);
    mp_graph_add_node(g, "mm", "MatMul", "", 2, (int32_t[]){x, w}, 1, &m);
    mp_graph_add_node(g, "erf", "Erf", "", 1, &m, 1, &e);
    mp_graph_add_node(g, "pow", "Pow", "", 2, (int32_t[]){e, two}, 1, &p);
    mp_graph_add_node(g, "add", "Add", "", 2, (int32_t[]){p, c}, 1, &a);
    mp_graph_add_node(g, "sqrt", "Sqrt", "", 1, &a, 1, &q);
    mp_graph_add_node(g, "where", "Where", "", 3, (int32_t[]){cond, q, m}, 1, &z);
    int32_t tid = mp_graph_add_node(g, "tr", "Transpose", "", 1, &z, 1, &t);
    mp_node *tn = &g->nodes[tid];
    tn->attrs = mp_arena_alloc(g->arena, sizeof *tn->attrs);
    tn->attrs[0] = (mp_attr){
        .name = "perm", .type = MP_ATTR_INTS, .n = 3, .ints = mp_arena_dup(g->arena, (int64_t[]){0, 2, 1}, 24)};
    tn->nattrs = 1;
    int32_t sm = dvalue(g, "sm", 0, -1, NULL);
    mp_graph_add_node(g, "softmax", "Softmax", "", 1, &t, 1, &sm); /* axis -1 (opset 13+) */
    mp_graph_add_node(g, "reshape", "Reshape", "", 2, (int32_t[]){sm, shape}, 1, &y);
    int32_t ins[2] = {x, cond};
    set_io(g, x, y);
    g->inputs = mp_arena_dup(g->arena, ins, sizeof ins), g->ninputs = 2;
    fd_check(g, MP_LOSS_AUTO);
    ck_assert_int_ge(mp_graph_find(g, "labels"), 0);
    mp_graph_free(g);
}
END_TEST

/* MSE of Concat(Split(Gelu(LayerNormalization(Gather(emb, tokens))))) reordered:
 * Gather (repeated indices accumulate), LayerNormalization, Gelu, Split, Concat. */
START_TEST(finite_differences_embedding)
{
    mp_graph *g = mp_graph_new(NULL);
    static mp_opset opset = {"", 20};
    g->opsets = &opset, g->nopsets = 1;
    int32_t tok = mp_graph_add_value(g, "tokens");
    mp_value_set(g, tok, MP_INT64, 2, (mp_dim[]){mp_dim_of(2), mp_dim_of(3)});
    g->values[tok].flags = MP_VAL_INPUT;
    int32_t emb = dvalue(g, "emb", MP_VAL_INITIALIZER, 2, (int64_t[]){5, 4});
    int32_t gam = dvalue(g, "gamma", MP_VAL_INITIALIZER, 1, (int64_t[]){4});
    int32_t bet = dvalue(g, "beta", MP_VAL_INITIALIZER, 1, (int64_t[]){4});
    int32_t sizes = dconst(g, "sizes", MP_INT64, 1, (int64_t[]){2}, (double[]){1, 3});
    int32_t h = dvalue(g, "h", 0, -1, NULL), l = dvalue(g, "l", 0, -1, NULL), u = dvalue(g, "u", 0, -1, NULL);
    int32_t s1 = dvalue(g, "s1", 0, -1, NULL), s2 = dvalue(g, "s2", 0, -1, NULL), y = dvalue(g, "y", 0, -1, NULL);
    mp_graph_add_node(g, "gather", "Gather", "", 2, (int32_t[]){emb, tok}, 1, &h);
    mp_graph_add_node(g, "ln", "LayerNormalization", "", 3, (int32_t[]){h, gam, bet}, 1, &l);
    mp_graph_add_node(g, "gelu", "Gelu", "", 1, &l, 1, &u);
    int32_t sid = mp_graph_add_node(g, "split", "Split", "", 2, (int32_t[]){u, sizes}, 2, (int32_t[]){s1, s2});
    int32_t cid = mp_graph_add_node(g, "concat", "Concat", "", 2, (int32_t[]){s2, s1}, 1, &y);
    for (int i = 0; i < 2; i++) {
        mp_node *n = &g->nodes[i ? cid : sid];
        n->attrs = mp_arena_alloc(g->arena, sizeof *n->attrs);
        n->attrs[0] = (mp_attr){.name = "axis", .type = MP_ATTR_INT, .i = -1};
        n->nattrs = 1;
    }
    set_io(g, tok, y);
    fd_check(g, MP_LOSS_MSE);
    mp_graph_free(g);
}
END_TEST

static void set_ints(mp_graph *g, int32_t node, int i, const char *name, int n, const int64_t *v)
{
    g->nodes[node].attrs[i] =
        (mp_attr){.name = name, .type = MP_ATTR_INTS, .n = n, .ints = mp_arena_dup(g->arena, v, (size_t)n * sizeof *v)};
}

/* Cross-entropy of Flatten(GlobalAveragePool(MaxPool(Relu(BatchNormalization(Conv(x, W, B)))))),
 * BatchNormalization in training mode: ConvGrad (dW, dB), BatchNormalizationGrad, MaxPoolGrad. */
START_TEST(finite_differences_cnn)
{
    mp_graph *g = mp_graph_new(NULL);
    static mp_opset opset = {"", 15};
    g->opsets = &opset, g->nopsets = 1;
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 4, (int64_t[]){2, 2, 5, 5});
    int32_t w = dvalue(g, "W", MP_VAL_INITIALIZER, 4, (int64_t[]){3, 2, 3, 3});
    int32_t b = dvalue(g, "B", MP_VAL_INITIALIZER, 1, (int64_t[]){3});
    int32_t gam = dvalue(g, "bn.weight", MP_VAL_INITIALIZER, 1, (int64_t[]){3});
    int32_t bet = dvalue(g, "bn.bias", MP_VAL_INITIALIZER, 1, (int64_t[]){3});
    int32_t rm = dvalue(g, "bn.running_mean", MP_VAL_INITIALIZER, 1, (int64_t[]){3});
    int32_t rv = dvalue(g, "bn.running_var", MP_VAL_INITIALIZER, 1, (int64_t[]){3});
    int32_t c = dvalue(g, "c", 0, -1, NULL), n = dvalue(g, "n", 0, -1, NULL), r = dvalue(g, "r", 0, -1, NULL);
    int32_t mpo = dvalue(g, "mp", 0, -1, NULL), ga = dvalue(g, "ga", 0, -1, NULL), y = dvalue(g, "y", 0, -1, NULL);
    int32_t conv = mp_graph_add_node(g, "conv", "Conv", "", 3, (int32_t[]){x, w, b}, 1, &c);
    int32_t bn = mp_graph_add_node(g, "bn", "BatchNormalization", "", 5, (int32_t[]){c, gam, bet, rm, rv}, 1, &n);
    mp_graph_add_node(g, "relu", "Relu", "", 1, &n, 1, &r);
    int32_t pool = mp_graph_add_node(g, "pool", "MaxPool", "", 1, &r, 1, &mpo);
    mp_graph_add_node(g, "gap", "GlobalAveragePool", "", 1, &mpo, 1, &ga);
    mp_graph_add_node(g, "flat", "Flatten", "", 1, &ga, 1, &y);
    g->nodes[conv].attrs = mp_arena_alloc(g->arena, sizeof(mp_attr)), g->nodes[conv].nattrs = 1;
    set_ints(g, conv, 0, "pads", 4, (int64_t[]){1, 1, 1, 1});
    g->nodes[bn].attrs = mp_arena_alloc(g->arena, sizeof(mp_attr)), g->nodes[bn].nattrs = 1;
    g->nodes[bn].attrs[0] = (mp_attr){.name = "training_mode", .type = MP_ATTR_INT, .i = 1};
    g->nodes[pool].attrs = mp_arena_alloc(g->arena, 2 * sizeof(mp_attr)), g->nodes[pool].nattrs = 2;
    set_ints(g, pool, 0, "kernel_shape", 2, (int64_t[]){2, 2});
    set_ints(g, pool, 1, "strides", 2, (int64_t[]){2, 2});
    set_io(g, x, y);
    fd_check(g, MP_LOSS_AUTO);
    ck_assert_int_eq(g->values[rm].role, MP_ROLE_BUFFER);
    mp_graph_free(g);
}
END_TEST

/* MaxUnpool of MaxPool(x * W) with overlapping windows (kernel 3, stride 2):
 * two entries may go to one position, so the gradient is refused by name. */
START_TEST(unpool_overlap_error)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 4, (int64_t[]){1, 1, 5, 5});
    int32_t w = dvalue(g, "W", MP_VAL_INITIALIZER, 4, (int64_t[]){1, 1, 5, 5});
    int32_t a = dvalue(g, "a", 0, -1, NULL), m = dvalue(g, "m", 0, -1, NULL), ix = dvalue(g, "ix", 0, -1, NULL);
    int32_t y = dvalue(g, "y", 0, -1, NULL);
    mp_graph_add_node(g, "mul", "Mul", "", 2, (int32_t[]){x, w}, 1, &a);
    int32_t nodes[2] = {mp_graph_add_node(g, "pool", "MaxPool", "", 1, &a, 2, (int32_t[]){m, ix}),
                        mp_graph_add_node(g, "the_unpool", "MaxUnpool", "", 2, (int32_t[]){m, ix}, 1, &y)};
    for (int k = 0; k < 2; k++) {
        g->nodes[nodes[k]].attrs = mp_arena_alloc(g->arena, 2 * sizeof(mp_attr)), g->nodes[nodes[k]].nattrs = 2;
        set_ints(g, nodes[k], 0, "kernel_shape", 2, (int64_t[]){3, 3});
        set_ints(g, nodes[k], 1, "strides", 2, (int64_t[]){2, 2});
    }
    set_io(g, x, y);
    build_fails(g, MP_LOSS_SUM, "the_unpool", "overlapping windows (kernel 3 over stride 2");
    mp_graph_free(g);
}
END_TEST

/* MSE of Flatten(Dropout(Slice(AveragePool(HardSigmoid(HardSwish(x * W)))))) with a
 * training-mode Dropout (its mask output is added by the rule): HardSwish,
 * HardSigmoid, AveragePoolGrad, SliceGrad, DropoutGrad. */
START_TEST(finite_differences_pool_dropout)
{
    mp_graph *g = mp_graph_new(NULL);
    static mp_opset opset = {"", 14};
    g->opsets = &opset, g->nopsets = 1;
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 4, (int64_t[]){1, 2, 4, 4});
    int32_t w = dvalue(g, "W", MP_VAL_INITIALIZER, 4, (int64_t[]){1, 2, 4, 4});
    int32_t st = dconst(g, "starts", MP_INT64, 1, (int64_t[]){1}, (double[]){1});
    int32_t en = dconst(g, "ends", MP_INT64, 1, (int64_t[]){1}, (double[]){2});
    int32_t ax = dconst(g, "axes", MP_INT64, 1, (int64_t[]){1}, (double[]){3});
    int32_t ratio = dconst(g, "ratio", MP_DOUBLE, 0, NULL, (double[]){0.5});
    int32_t train = dconst(g, "train", MP_BOOL, 0, NULL, (double[]){1});
    int32_t m = dvalue(g, "m", 0, -1, NULL), hs = dvalue(g, "hs", 0, -1, NULL), hg = dvalue(g, "hg", 0, -1, NULL);
    int32_t ap = dvalue(g, "ap", 0, -1, NULL), sl = dvalue(g, "sl", 0, -1, NULL), dr = dvalue(g, "dr", 0, -1, NULL);
    int32_t y = dvalue(g, "y", 0, -1, NULL);
    mp_graph_add_node(g, "mul", "Mul", "", 2, (int32_t[]){x, w}, 1, &m);
    mp_graph_add_node(g, "hswish", "HardSwish", "", 1, &m, 1, &hs);
    mp_graph_add_node(g, "hsig", "HardSigmoid", "", 1, &hs, 1, &hg);
    int32_t pool = mp_graph_add_node(g, "pool", "AveragePool", "", 1, &hg, 1, &ap);
    mp_graph_add_node(g, "slice", "Slice", "", 4, (int32_t[]){ap, st, en, ax}, 1, &sl);
    mp_graph_add_node(g, "drop", "Dropout", "", 3, (int32_t[]){sl, ratio, train}, 1, &dr);
    mp_graph_add_node(g, "flat", "Flatten", "", 1, &dr, 1, &y);
    g->nodes[pool].attrs = mp_arena_alloc(g->arena, 2 * sizeof(mp_attr)), g->nodes[pool].nattrs = 2;
    set_ints(g, pool, 0, "kernel_shape", 2, (int64_t[]){2, 2});
    set_ints(g, pool, 1, "strides", 2, (int64_t[]){2, 2});
    set_io(g, x, y);
    fd_check(g, MP_LOSS_MSE);
    int32_t drop = g->values[dr].producer;
    ck_assert_int_eq(g->nodes[drop].nout, 2); /* the mask the backward reads */
    ck_assert(mp_value_is_saved(g, g->nodes[drop].out[1]));
    mp_graph_free(g);
}
END_TEST

/* PyTorch's measured figures (../shared/peers/torch-cpu.txt, made by
 * ../shared/tools/torch_peer.py): parameters and AdamW state (moments and step
 * counters) exactly, the bytes saved for backward within 10 % (docs/validation.md). */
static int64_t peer_field(const char *line, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *p = strstr(line, k);
    return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

START_TEST(torch_peer)
{
    const char *peers = MEMPLAN_SHARED "/peers/torch-cpu.txt";
    FILE *f = fopen(peers, "r");
    if (!f) {
        printf("skip: %s absent\n", peers);
        return;
    }
    char line[1024], name[128];
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "model=%127s", name) != 1) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/models/torch/%s_train.onnx", MEMPLAN_SHARED, name);
        if (access(path, R_OK)) {
            printf("skip: %s absent\n", path);
            continue;
        }
        int64_t dims[2] = {peer_field(line, "batch"), peer_field(line, "seq")};
        int64_t t_params = peer_field(line, "params"), t_state = peer_field(line, "optimizer_state_bytes");
        int64_t t_saved = peer_field(line, "saved_for_backward_bytes");
        ck_assert_msg(dims[0] > 0 && t_params > 0 && t_state > 0 && t_saved > 0, "bad peer line: %s", line);
        step s;
        mp_err err;
        mp_train_opts o = mp_train_defaults();
        ck_assert_msg(!build(&s, path, &o, dims[1] > 0 ? 2 : 1, (const char *[]){"batch", "sequence"}, dims, &err),
                      "%s: %s", name, err.msg);
        ck_assert_int_eq(s.param_elems, t_params);
        ck_assert_int_eq(s.state_bytes, t_state);
        mp_schedule sc;
        mp_memory m;
        ck_assert_msg(!mp_schedule_graph_order(s.g, &sc, &err), "%s", err.msg);
        ck_assert_msg(!mp_memory_analyze(s.g, &sc, &m, &err), "%s", err.msg);
        ck_assert_int_eq(m.totals[MP_MEM_OPT_STATE], t_state);
        double diff = (double)(m.saved_activation_bytes - t_saved) / (double)t_saved;
        ck_assert_msg(fabs(diff) <= 0.10, "%s: saved %lld vs PyTorch %lld (%+.1f %%)", name,
                      (long long)m.saved_activation_bytes, (long long)t_saved, 100 * diff);
        mp_memory_free(&m);
        mp_schedule_free(&sc);
        close_step(&s);
        checked++;
    }
    fclose(f);
    ck_assert_int_gt(checked, 0);
}
END_TEST

/* The exporters' expansions of GELU (erf) and LayerNorm (opset < 17) are
 * folded back, so the backward saves what the fused op saves. */
START_TEST(fused_expansions)
{
    const char *path = MEMPLAN_SHARED "/models/torch/gpt2_small_like_train.onnx";
    if (access(path, R_OK)) {
        printf("skip: %s absent\n", path);
        return;
    }
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(!build(&s, path, &o, 2, (const char *[]){"batch", "sequence"}, (int64_t[]){1, 32}, &err), "%s",
                  err.msg);
    int gelu = 0, ln = 0, erf = 0, pow = 0;
    for (int32_t i = 0; i < s.g->nnodes; i++) {
        const char *op = s.g->nodes[i].op_type;
        if (s.g->nodes[i].phase != MP_PHASE_FORWARD) continue;
        gelu += !strcmp(op, "Gelu");
        ln += !strcmp(op, "LayerNormalization");
        erf += !strcmp(op, "Erf");
        pow += !strcmp(op, "Pow");
    }
    ck_assert_int_eq(gelu, 12); /* one per block */
    ck_assert_int_eq(ln, 25);   /* two per block and the final one */
    ck_assert_int_eq(erf, 0);
    ck_assert_int_eq(pow, 0);
    check_step(&s);
    close_step(&s);
}
END_TEST

/* An exporter's expansions: y = LayerNorm_expanded(GELU_expanded(x * p), w, b) over the last axis. */
static int32_t expanded_gelu_ln(mp_graph *g, int32_t *x_out)
{
    static mp_opset opset = {"", 14};
    g->opsets = &opset, g->nopsets = 1;
    int32_t x = dvalue(g, "x", MP_VAL_INPUT, 2, (int64_t[]){3, 4});
    int32_t p = dvalue(g, "p", MP_VAL_INITIALIZER, 1, (int64_t[]){4});
    int32_t w = dvalue(g, "w", MP_VAL_INITIALIZER, 1, (int64_t[]){4});
    int32_t b = dvalue(g, "b", MP_VAL_INITIALIZER, 1, (int64_t[]){4});
    int32_t sqrt2 = dconst(g, "sqrt2", MP_DOUBLE, 0, NULL, (double[]){1.4142135623730951});
    int32_t one = dconst(g, "one", MP_DOUBLE, 0, NULL, (double[]){1.0});
    int32_t half = dconst(g, "half", MP_DOUBLE, 0, NULL, (double[]){0.5});
    int32_t two = dconst(g, "two", MP_DOUBLE, 0, NULL, (double[]){2.0});
    int32_t eps = dconst(g, "eps", MP_DOUBLE, 0, NULL, (double[]){1e-5});
    static const char *const names[] = {"h",  "s",  "e",   "e1", "xe", "gl", "mu", "d",
                                        "d2", "var", "ve", "sd", "n",  "nw", "y"};
    int32_t v[15];
    for (int i = 0; i < 15; i++) v[i] = dvalue(g, names[i], 0, -1, NULL);
    mp_graph_add_node(g, NULL, "Mul", "", 2, (int32_t[]){x, p}, 1, &v[0]);
    mp_graph_add_node(g, NULL, "Div", "", 2, (int32_t[]){v[0], sqrt2}, 1, &v[1]);
    mp_graph_add_node(g, NULL, "Erf", "", 1, &v[1], 1, &v[2]);
    mp_graph_add_node(g, NULL, "Add", "", 2, (int32_t[]){v[2], one}, 1, &v[3]);
    mp_graph_add_node(g, NULL, "Mul", "", 2, (int32_t[]){v[0], v[3]}, 1, &v[4]);
    mp_graph_add_node(g, NULL, "Mul", "", 2, (int32_t[]){v[4], half}, 1, &v[5]);
    int32_t r1 = mp_graph_add_node(g, NULL, "ReduceMean", "", 1, &v[5], 1, &v[6]);
    mp_graph_add_node(g, NULL, "Sub", "", 2, (int32_t[]){v[5], v[6]}, 1, &v[7]);
    mp_graph_add_node(g, NULL, "Pow", "", 2, (int32_t[]){v[7], two}, 1, &v[8]);
    int32_t r2 = mp_graph_add_node(g, NULL, "ReduceMean", "", 1, &v[8], 1, &v[9]);
    mp_graph_add_node(g, NULL, "Add", "", 2, (int32_t[]){v[9], eps}, 1, &v[10]);
    mp_graph_add_node(g, NULL, "Sqrt", "", 1, &v[10], 1, &v[11]);
    mp_graph_add_node(g, NULL, "Div", "", 2, (int32_t[]){v[7], v[11]}, 1, &v[12]);
    mp_graph_add_node(g, NULL, "Mul", "", 2, (int32_t[]){v[12], w}, 1, &v[13]);
    mp_graph_add_node(g, NULL, "Add", "", 2, (int32_t[]){v[13], b}, 1, &v[14]);
    for (int k = 0; k < 2; k++) {
        int32_t r = k ? r2 : r1;
        g->nodes[r].attrs = mp_arena_alloc(g->arena, sizeof *g->nodes[r].attrs);
        g->nodes[r].nattrs = 1;
        set_ints(g, r, 0, "axes", 1, (int64_t[]){-1});
    }
    set_io(g, x, v[14]);
    *x_out = x;
    return v[14];
}

/* The fused graph computes what the expansion computes (same output on the
 * CPU executor), and its gradients agree with finite differences. */
START_TEST(fused_expansions_equal)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x, y = expanded_gelu_ln(g, &x);
    mp_err err;
    ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s", err.msg);
    int32_t nv = g->nvalues; /* the inputs and weights; the step adds values after them */
    mp_tensor **data = mp_arena_alloc(g->arena, (size_t)nv * sizeof *data);
    mp_exec *ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(ex, "%s", err.msg);
    uint64_t r = 99;
    for (int32_t v = 0; v < nv; v++) {
        data[v] = NULL;
        const mp_value *val = &g->values[v];
        if (!(val->flags & (MP_VAL_INPUT | MP_VAL_INITIALIZER))) continue;
        int64_t dims[4];
        for (int i = 0; i < val->rank; i++) dims[i] = val->dims[i].v;
        data[v] = mp_tensor_new(g->arena, val->dtype, val->rank, dims);
        for (int64_t i = 0; i < data[v]->numel; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            mp_tensor_set_f64(data[v], i, (double)(r >> 11) / 9007199254740992.0 * 2 - 1);
        }
        ck_assert_msg(!mp_exec_bind(ex, v, data[v], &err), "%s", err.msg);
    }
    ck_assert_msg(!mp_exec_run(ex, &err), "%s", err.msg);
    double want[12];
    for (int i = 0; i < 12; i++) want[i] = mp_tensor_get_f64(mp_exec_value(ex, y), i);
    mp_exec_free(ex);

    mp_train_opts o = mp_train_defaults();
    o.loss = MP_LOSS_SUM;
    o.optimizer = MP_OPT_SGD;
    ck_assert_msg(!mp_train_build(g, &o, &err), "%s", err.msg);
    int fused = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const char *op = g->nodes[i].op_type;
        fused += !strcmp(op, "Gelu") || !strcmp(op, "LayerNormalization");
        ck_assert_msg(strcmp(op, "Erf") && strcmp(op, "Pow") && strcmp(op, "Sqrt"), "%s left", op);
    }
    ck_assert_int_eq(fused, 2);
    g->outputs = mp_arena_dup(g->arena, &y, sizeof y), g->noutputs = 1;
    ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(ex, "%s", err.msg);
    for (int32_t v = 0; v < nv; v++)
        if (data[v])
            ck_assert_msg(!mp_exec_bind(ex, v, data[v], &err), "%s", err.msg);
    ck_assert_msg(!mp_exec_run(ex, &err), "%s", err.msg);
    for (int i = 0; i < 12; i++)
        ck_assert_msg(fabs(mp_tensor_get_f64(mp_exec_value(ex, y), i) - want[i]) <= 1e-9, "y[%d]: %.12g vs %.12g", i,
                      mp_tensor_get_f64(mp_exec_value(ex, y), i), want[i]);
    mp_exec_free(ex);
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    expanded_gelu_ln(g, &x);
    fd_check(g, MP_LOSS_SUM);
    mp_graph_free(g);
}
END_TEST

START_TEST(bad_options)
{
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    o.micro_batches = 0;
    ck_assert_int_eq(build(&s, MODEL("mlp.onnx"), &o, 1, (const char *[]){"batch"}, (int64_t[]){4}, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "micro_batches"));
    close_step(&s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("train");
    TCase *tc = tcase_create("step");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, mlp_adamw);
    tcase_add_test(tc, mlp_optimizers);
    tcase_add_test(tc, mlp_micro_batches);
    tcase_add_test(tc, mixed_precision);
    tcase_add_test(tc, cnn_bn);
    tcase_add_test(tc, gpt_decoder);
    tcase_add_test(tc, loss_in_place);
    tcase_add_test(tc, optimizer_in_backward);
    tcase_add_test(tc, resnet50);
    tcase_add_test(tc, finite_differences_xent);
    tcase_add_test(tc, finite_differences_embedding);
    tcase_add_test(tc, finite_differences_cnn);
    tcase_add_test(tc, finite_differences_pool_dropout);
    tcase_add_test(tc, torch_zoo);
    tcase_add_test(tc, no_rule_error);
    tcase_add_test(tc, fp8_loss_error);
    tcase_add_test(tc, value_dependent_shape_error);
    tcase_add_test(tc, finite_differences_gemm);
    tcase_add_test(tc, finite_differences_elementwise);
    tcase_add_test(tc, finite_differences_squeeze);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, unpool_overlap_error);
    tcase_add_test(tc, torch_peer);
    tcase_add_test(tc, fused_expansions);
    tcase_add_test(tc, fused_expansions_equal);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
