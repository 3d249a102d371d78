/* test_train.c - the training step (passes/train.h) on the project's models
 * and PyTorch's ResNet-50: parameter counts, one gradient per parameter of
 * its shape, optimizer state sizes, roles and phases on everything, and an
 * error naming the node for an op without a gradient rule. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/train.h"

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
        if (v->kind == MP_KIND_TENSOR && v->dtype != MP_STRING && (v->ncons || v->producer >= 0 || v->role != MP_ROLE_ACTIVATION))
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
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes);
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
        ck_assert_msg(!build(&s, MODEL("mlp.onnx"), &o, 1, (const char *[]){"batch"}, (int64_t[]){4}, &err), "%s", err.msg);
        check_step(&s);
        ck_assert_int_ge(mp_graph_find(s.g, "target"), 0);
        if (kinds[k] == MP_OPT_SGD) ck_assert_int_eq(s.state_bytes, 0);
        if (kinds[k] == MP_OPT_MOMENTUM) ck_assert_int_eq(s.state_bytes, s.param_bytes);
        if (kinds[k] == MP_OPT_ADAM) ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes);
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

START_TEST(cnn_bn)
{
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(!build(&s, MODEL("cnn_bn.onnx"), &o, 1, (const char *[]){"batch"}, (int64_t[]){2}, &err), "%s", err.msg);
    ck_assert_int_eq(s.param_elems, 25626); /* running stats are buffers */
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes);
    int buffers = 0;
    for (int32_t i = 0; i < s.g->nvalues; i++) buffers += s.g->values[i].role == MP_ROLE_BUFFER;
    ck_assert_int_eq(buffers, 4);
    check_step(&s);
    close_step(&s);
}
END_TEST

START_TEST(gpt_decoder)
{
    step s;
    mp_err err;
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(!build(&s, MODEL("gpt_decoder.onnx"), &o, 2, (const char *[]){"batch", "sequence"},
                         (int64_t[]){2, 16}, &err),
                  "%s", err.msg);
    ck_assert_int_eq(s.param_elems, 141056);
    ck_assert_int_eq(s.ngrads, s.nparams);
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes);
    int32_t labels = mp_graph_find(s.g, "labels");
    ck_assert_int_ge(labels, 0);
    ck_assert_int_eq(s.g->values[labels].rank, 2);
    check_step(&s);
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
    ck_assert_int_eq(s.state_bytes, 2 * s.param_bytes);
    check_step(&s);
    close_step(&s);
}
END_TEST

/* y = Sin(x * W): Sin has no gradient rule and lies between W and the loss. */
START_TEST(no_rule_error)
{
    mp_graph *g = mp_graph_new(NULL);
    mp_dim d[2] = {mp_dim_of(2), mp_dim_of(3)};
    int32_t x = mp_graph_add_value(g, "x"), w = mp_graph_add_value(g, "W");
    int32_t xw = mp_graph_add_value(g, "xw"), y = mp_graph_add_value(g, "y");
    mp_value_set(g, x, MP_FLOAT, 2, d);
    mp_value_set(g, w, MP_FLOAT, 2, d);
    g->values[x].flags = MP_VAL_INPUT;
    g->values[w].flags = MP_VAL_INITIALIZER;
    g->values[y].flags = MP_VAL_OUTPUT;
    static int32_t ins[1], inits[1], outs[1];
    ins[0] = x, inits[0] = w, outs[0] = y;
    g->inputs = ins, g->ninputs = 1, g->inits = inits, g->ninits = 1, g->outputs = outs, g->noutputs = 1;
    mp_graph_add_node(g, "mul", "Mul", "", 2, (int32_t[]){x, w}, 1, &xw);
    mp_graph_add_node(g, "the_sin", "Sin", "", 1, &xw, 1, &y);
    mp_err err;
    ck_assert_msg(!mp_graph_link(g, &err), "%s", err.msg);
    ck_assert_msg(!mp_infer(g, &err), "%s", err.msg);
    mp_train_opts o = mp_train_defaults();
    o.loss = MP_LOSS_SUM;
    ck_assert_int_eq(mp_train_build(g, &o, &err), -1);
    ck_assert_msg(strstr(err.msg, "the_sin") && strstr(err.msg, "Sin"), "message: %s", err.msg);
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
    tcase_add_test(tc, cnn_bn);
    tcase_add_test(tc, gpt_decoder);
    tcase_add_test(tc, resnet50);
    tcase_add_test(tc, no_rule_error);
    tcase_add_test(tc, bad_options);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
