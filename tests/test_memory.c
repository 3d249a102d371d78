/* test_memory.c - schedules, lifetimes and the memory breakdown: hand-built
 * graphs with known lifetimes (exact peak, step and breakdown; in-place
 * aliases add no bytes; unconsumed outputs are transient), forward-only
 * analysis of the models in models/, and `memplan MODEL.onnx` run as a program. */
#include <check.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/memory.h"
#include "passes/schedule.h"
#include "passes/train.h"
#include "run_memplan.h" /* defines: RUN, run_result, run_free */


/* ---- building graphs by hand ------------------------------------------------ */

/* A float value of exactly `bytes` bytes (a 1-D tensor of bytes/4 elements). */
static int32_t val(mp_graph *g, const char *name, int64_t bytes, mp_role role)
{
    int32_t v = mp_graph_add_value(g, name);
    mp_value_set(g, v, MP_FLOAT, 1, (mp_dim[]){mp_dim_of(bytes / 4)});
    g->values[v].role = role;
    return v;
}

static void mark_input(mp_graph *g, int32_t v)
{
    g->values[v].flags |= MP_VAL_INPUT;
    g->inputs = mp_arena_dup(g->arena, (int32_t[]){v}, sizeof(int32_t));
    g->ninputs = 1;
}

static void mark_output(mp_graph *g, int32_t v)
{
    g->values[v].flags |= MP_VAL_OUTPUT;
    g->outputs = mp_arena_dup(g->arena, (int32_t[]){v}, sizeof(int32_t));
    g->noutputs = 1;
}

static int32_t node(mp_graph *g, const char *name, mp_phase phase, int nin, const int32_t *in, int nout,
                    const int32_t *out)
{
    int32_t n = mp_graph_add_node(g, name, "Identity", "", nin, in, nout, out);
    g->nodes[n].phase = phase;
    return n;
}

static void analyze(mp_graph *g, mp_memory *m)
{
    mp_err err = {{0}};
    mp_schedule s;
    ck_assert_int_eq(mp_graph_link(g, &err), 0);
    ck_assert_int_eq(mp_schedule_graph_order(g, &s, &err), 0);
    ck_assert_msg(mp_memory_analyze(g, &s, m, &err) == 0, "%s", err.msg);
    mp_schedule_free(&s);
}

/* x(1000, input) w(100, param)
 *   step 0 n0: a = f(x)             2000
 *   step 1 n1: b, d = f(a, w)       4000, 48 (d: nothing reads it)
 *   step 2 n2: c = f(b)             8000 (graph output)
 *   step 3 n3: e = f(a)             16000 (graph output) */
START_TEST(test_chain_lifetimes)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = val(g, "x", 1000, MP_ROLE_INPUT), w = val(g, "w", 100, MP_ROLE_PARAM);
    int32_t a = val(g, "a", 2000, MP_ROLE_ACTIVATION), b = val(g, "b", 4000, MP_ROLE_ACTIVATION);
    int32_t d = val(g, "d", 48, MP_ROLE_ACTIVATION), c = val(g, "c", 8000, MP_ROLE_ACTIVATION);
    int32_t e = val(g, "e", 16000, MP_ROLE_ACTIVATION);
    mark_input(g, x);
    node(g, "n0", MP_PHASE_FORWARD, 1, &x, 1, &a);
    node(g, "n1", MP_PHASE_FORWARD, 2, (int32_t[]){a, w}, 2, (int32_t[]){b, d});
    node(g, "n2", MP_PHASE_FORWARD, 1, &b, 1, &c);
    node(g, "n3", MP_PHASE_FORWARD, 1, &a, 1, &e);
    g->values[c].flags |= MP_VAL_OUTPUT;
    mark_output(g, e);

    mp_memory m;
    analyze(g, &m);
    ck_assert_int_eq(m.nsteps, 4);
    static const int64_t want[4] = {3100, 7148, 15100, 27100};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(mp_memory_live_total(&m, i), want[i]);
    ck_assert_int_eq(m.peak_bytes, 27100);
    ck_assert_int_eq(m.peak_step, 3);
    ck_assert_str_eq(g->nodes[m.peak_node].name, "n3");
    ck_assert_int_eq(m.at_peak[MP_MEM_PARAMS], 100);
    ck_assert_int_eq(m.at_peak[MP_MEM_INPUTS], 1000);
    ck_assert_int_eq(m.at_peak[MP_MEM_ACTIVATIONS], 26000);
    ck_assert_int_eq(m.at_peak[MP_MEM_TRANSIENT], 0);
    ck_assert_int_eq(m.totals[MP_MEM_ACTIVATIONS], 30000);
    ck_assert_int_eq(m.totals[MP_MEM_TRANSIENT], 48);
    /* d lives only at its producer's step */
    ck_assert_int_eq(m.lt.start[d], 1);
    ck_assert_int_eq(m.lt.end[d], 1);
    ck_assert_int_eq(m.cat[d], MP_MEM_TRANSIENT);
    ck_assert_int_eq(m.live[1 * MP_MEM_COUNT + MP_MEM_TRANSIENT], 48);
    /* a is read at step 3, after b and c */
    ck_assert_int_eq(m.lt.end[a], 3);
    ck_assert_int_eq(m.lt.end[e], 3);
    /* the largest live at the peak: e, c, a, x, w; b and d are dead */
    ck_assert_int_eq(m.ntop, 5);
    ck_assert_int_eq(m.top[0], e);
    ck_assert_int_eq(m.top[1], c);
    ck_assert_int_eq(m.top[2], a);
    ck_assert_int_eq(m.top[3], x);
    ck_assert_int_eq(m.top[4], w);
    ck_assert_int_eq(m.saved_activation_bytes, 0);
    mp_memory_free(&m);
    mp_graph_free(g);
}
END_TEST

/* x(1000) -> a(2000) -> b(2000, in place over a) -> c(500, output): b adds no
 * bytes and keeps a's buffer alive to step 2. Counting b apart would give a
 * peak of 5000 at step 1. */
START_TEST(test_alias_not_double_counted)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = val(g, "x", 1000, MP_ROLE_INPUT), a = val(g, "a", 2000, MP_ROLE_ACTIVATION);
    int32_t b = val(g, "b", 2000, MP_ROLE_ACTIVATION), c = val(g, "c", 500, MP_ROLE_ACTIVATION);
    mark_input(g, x);
    mark_output(g, c);
    node(g, "n0", MP_PHASE_FORWARD, 1, &x, 1, &a);
    node(g, "n1", MP_PHASE_FORWARD, 1, &a, 1, &b);
    node(g, "n2", MP_PHASE_FORWARD, 1, &b, 1, &c);
    g->values[b].alias = a;

    mp_memory m;
    analyze(g, &m);
    ck_assert_int_eq(mp_memory_live_total(&m, 0), 3000);
    ck_assert_int_eq(mp_memory_live_total(&m, 1), 3000);
    ck_assert_int_eq(mp_memory_live_total(&m, 2), 3500);
    ck_assert_int_eq(m.peak_bytes, 3500);
    ck_assert_int_eq(m.peak_step, 2);
    ck_assert_int_eq(m.lt.owner[b], a);
    ck_assert_int_eq(m.lt.start[b], -1);
    ck_assert_int_eq(m.lt.end[a], 2);
    ck_assert_int_eq(m.totals[MP_MEM_ACTIVATIONS], 2500);
    mp_memory_free(&m);

    /* a cycle of aliases is an error, not a hang */
    g->values[a].alias = b;
    mp_err err = {{0}};
    mp_schedule s;
    ck_assert_int_eq(mp_schedule_graph_order(g, &s, &err), 0);
    ck_assert_int_eq(mp_memory_analyze(g, &s, &m, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "cycle"));
    mp_schedule_free(&s);
    mp_graph_free(g);
}
END_TEST

/* A hand-made training step:
 *   0 fwd  y = f(x, w)        2000   (x input 1000, w param 400, m opt state 400)
 *   1 loss l = f(y)           4
 *   2 bwd  gy = f(l, y)       2000 transient
 *   3 bwd  gw = f(gy, x)      400 gradient
 *   4 opt  m2 = f(gw, m)      in place over m
 *   5 opt  w2 = f(w, gw, m2)  in place over w, graph output */
START_TEST(test_training_step)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = val(g, "x", 1000, MP_ROLE_INPUT), w = val(g, "w", 400, MP_ROLE_PARAM);
    int32_t mo = val(g, "m", 400, MP_ROLE_OPT_STATE), y = val(g, "y", 2000, MP_ROLE_ACTIVATION);
    int32_t l = val(g, "l", 4, MP_ROLE_ACTIVATION), gy = val(g, "gy", 2000, MP_ROLE_TRANSIENT);
    int32_t gw = val(g, "gw", 400, MP_ROLE_GRAD), m2 = val(g, "m2", 400, MP_ROLE_OPT_STATE);
    int32_t w2 = val(g, "w2", 400, MP_ROLE_PARAM);
    mark_input(g, x);
    mark_output(g, w2);
    node(g, "fwd", MP_PHASE_FORWARD, 2, (int32_t[]){x, w}, 1, &y);
    node(g, "loss", MP_PHASE_LOSS, 1, &y, 1, &l);
    node(g, "bwd_y", MP_PHASE_BACKWARD, 2, (int32_t[]){l, y}, 1, &gy);
    node(g, "bwd_w", MP_PHASE_BACKWARD, 2, (int32_t[]){gy, x}, 1, &gw);
    node(g, "opt_m", MP_PHASE_OPTIMIZER, 2, (int32_t[]){gw, mo}, 1, &m2);
    node(g, "opt_w", MP_PHASE_OPTIMIZER, 3, (int32_t[]){w, gw, m2}, 1, &w2);
    g->values[m2].alias = mo;
    g->values[w2].alias = w;

    mp_memory m;
    analyze(g, &m);
    static const int64_t want[6] = {3800, 3804, 5804, 4200, 2200, 2200};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(mp_memory_live_total(&m, i), want[i]);
    ck_assert_int_eq(m.peak_bytes, 5804);
    ck_assert_int_eq(m.peak_step, 2);
    ck_assert_str_eq(g->nodes[m.peak_node].name, "bwd_y");
    ck_assert_int_eq(m.at_peak[MP_MEM_PARAMS], 400);
    ck_assert_int_eq(m.at_peak[MP_MEM_OPT_STATE], 400);
    ck_assert_int_eq(m.at_peak[MP_MEM_INPUTS], 1000);
    ck_assert_int_eq(m.at_peak[MP_MEM_ACTIVATIONS], 2004);
    ck_assert_int_eq(m.at_peak[MP_MEM_TRANSIENT], 2000);
    ck_assert_int_eq(m.at_peak[MP_MEM_GRADS], 0);
    ck_assert_int_eq(m.totals[MP_MEM_GRADS], 400);
    ck_assert_int_eq(m.totals[MP_MEM_PARAMS], 400);   /* w2 is w's buffer */
    ck_assert_int_eq(m.totals[MP_MEM_OPT_STATE], 400);
    /* the gradient lives from its producer to the last optimizer update */
    ck_assert_int_eq(m.lt.start[gw], 3);
    ck_assert_int_eq(m.lt.end[gw], 5);
    /* y and the data input x are read by the backward; w is a parameter, and l is
     * the loss's (LOSS phase, not the forward's: docs/json.md), so neither counts */
    ck_assert_int_eq(m.saved_activation_bytes, 3000);
    ck_assert_int_eq(m.phase_nodes[MP_PHASE_BACKWARD], 2);
    mp_memory_free(&m);
    mp_graph_free(g);
}
END_TEST

START_TEST(test_schedule_check_and_unbound)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = mp_graph_add_value(g, "x");
    mp_value_set(g, x, MP_FLOAT, 2, (mp_dim[]){mp_sym_dim(g, "batch"), mp_dim_of(8)});
    int32_t y = val(g, "y", 64, MP_ROLE_NONE), z = val(g, "z", 64, MP_ROLE_NONE);
    mark_input(g, x);
    mark_output(g, z);
    node(g, "n0", MP_PHASE_FORWARD, 1, &x, 1, &y);
    node(g, "n1", MP_PHASE_FORWARD, 1, &y, 1, &z);
    mp_err err = {{0}};
    ck_assert_int_eq(mp_graph_link(g, &err), 0);

    /* a consumer before its producer, a node twice, a step short */
    mp_memory m;
    mp_schedule s = {(int32_t[]){1, 0}, 2};
    ck_assert_int_eq(mp_schedule_check(g, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "before 'n0'"));
    s = (mp_schedule){(int32_t[]){0, 0}, 2};
    ck_assert_int_eq(mp_memory_analyze(g, &s, &m, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "twice"));
    s = (mp_schedule){(int32_t[]){0}, 1};
    ck_assert_int_eq(mp_schedule_check(g, &s, &err), -1);

    /* x's size needs the unbound symbol: the error names it */
    s = (mp_schedule){(int32_t[]){0, 1}, 2};
    ck_assert_int_eq(mp_schedule_check(g, &s, &err), 0);
    ck_assert_int_eq(mp_memory_analyze(g, &s, &m, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'batch'"));

    /* bound, it plans; roles unset fall back to flags (x: input) */
    mp_symbol_bind(g, "batch", 2);
    mp_value_set(g, x, MP_FLOAT, 2, (mp_dim[]){mp_dim_of(2), mp_dim_of(8)});
    ck_assert_int_eq(mp_memory_analyze(g, &s, &m, &err), 0);
    ck_assert_int_eq(m.at_peak[MP_MEM_INPUTS], 64);
    ck_assert_int_eq(m.peak_bytes, 64 + 64 + 64);
    ck_assert_int_eq(m.peak_step, 1);
    mp_memory_free(&m);
    mp_graph_free(g);
}
END_TEST

/* ---- the roles memory is counted by (mp_train_classify, which inspect reports) ---- */

/* Weights given as graph inputs: x[batch, 4] data, ids[2] int64, w[4, 4] float. */
static mp_graph *inputs_graph(int32_t *x, int32_t *ids, int32_t *w)
{
    mp_graph *g = mp_graph_new(NULL);
    *x = mp_graph_add_value(g, "x");
    mp_value_set(g, *x, MP_FLOAT, 2, (mp_dim[]){mp_sym_dim(g, "batch"), mp_dim_of(4)});
    *ids = mp_graph_add_value(g, "ids");
    mp_value_set(g, *ids, MP_INT64, 1, (mp_dim[]){mp_dim_of(2)});
    *w = mp_graph_add_value(g, "w");
    mp_value_set(g, *w, MP_FLOAT, 2, (mp_dim[]){mp_dim_of(4), mp_dim_of(4)});
    g->inputs = mp_arena_dup(g->arena, (int32_t[]){*x, *ids, *w}, 3 * sizeof(int32_t));
    g->ninputs = 3;
    for (int i = 0; i < 3; i++) g->values[g->inputs[i]].flags |= MP_VAL_INPUT;
    return g;
}

START_TEST(test_classify_inputs)
{
    int32_t x, ids, w;
    mp_graph *g = inputs_graph(&x, &ids, &w);
    mp_err err = {{0}};
    mp_train_opts o = mp_train_defaults();
    /* named data inputs: an integer input not named stays an input (token ids are never weights) */
    o.data_inputs = (const char *const[]){"x", NULL};
    ck_assert_msg(!mp_train_classify(g, &o, &err), "%s", err.msg);
    ck_assert_int_eq(g->values[x].role, MP_ROLE_INPUT);
    ck_assert_int_eq(g->values[ids].role, MP_ROLE_INPUT);
    ck_assert_int_eq(g->values[w].role, MP_ROLE_PARAM);
    o.data_inputs = (const char *const[]){"nosuch", NULL};
    ck_assert_int_eq(mp_train_classify(g, &o, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "data_inputs"));

    /* told by the symbolic first dim, before and after --batch binds it (the
     * memory command classifies again once bound) */
    o.data_inputs = NULL;
    o.params_as_inputs = true;
    for (int bound = 0; bound < 2; bound++) {
        if (bound) {
            mp_symbol_bind(g, "batch", 8);
            mp_value_set(g, x, MP_FLOAT, 2, g->values[x].dims);
            ck_assert_int_eq(g->values[x].dims[0].v, 8);
        }
        ck_assert_msg(!mp_train_classify(g, &o, &err), "bound %d: %s", bound, err.msg);
        ck_assert_int_eq(g->values[x].role, MP_ROLE_INPUT);
        ck_assert_int_eq(g->values[ids].role, MP_ROLE_INPUT);
        ck_assert_int_eq(g->values[w].role, MP_ROLE_PARAM);
    }
    mp_graph_free(g);
}
END_TEST

/* ---- forward-only analysis of memplan's models --------------------------------- */

static mp_model *load_bound(const char *name, int64_t batch, mp_graph **g)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", MEMPLAN_SOURCE, name);
    mp_err err = {{0}};
    mp_model *mdl = mp_onnx_load(path, &err);
    ck_assert_msg(mdl != NULL, "%s", err.msg);
    *g = mdl->graph;
    const char *names[] = {"sequence"};
    int64_t values[] = {64};
    mp_bindings b = {.batch = batch, .nnamed = mp_symbol_find(*g, "sequence") >= 0, .names = names, .values = values};
    ck_assert_msg(mp_bind_dims(*g, &b, &err) == 0 && mp_infer(*g, &err) == 0, "%s: %s", name, err.msg);
    return mdl;
}

/* MLP 784-256-128-10 at batch 4: weights 940,584 B and the input 12,544 B live
 * throughout; the peak is at the first ReLU, with both 4x256 activations live. */
START_TEST(test_mlp_forward_exact)
{
    mp_graph *g;
    mp_model *mdl = load_bound("mlp.onnx", 4, &g);
    mp_schedule s;
    mp_memory m;
    mp_err err = {{0}};
    ck_assert_int_eq(mp_schedule_graph_order(g, &s, &err), 0);
    ck_assert_msg(mp_memory_analyze(g, &s, &m, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(m.totals[MP_MEM_PARAMS], 235146 * 4);
    ck_assert_int_eq(m.totals[MP_MEM_INPUTS], 4 * 784 * 4);
    ck_assert_int_eq(m.peak_bytes, 235146 * 4 + 4 * 784 * 4 + 2 * 4 * 256 * 4);
    ck_assert_int_eq(m.peak_step, 1);
    ck_assert_int_eq(m.at_peak[MP_MEM_ACTIVATIONS], 2 * 4 * 256 * 4);
    ck_assert_int_eq(m.saved_activation_bytes, 0);
    mp_memory_free(&m);
    mp_schedule_free(&s);
    mp_onnx_close(mdl);
}
END_TEST

/* Invariants on every model: the peak is the largest timeline row, holds every
 * persistent byte, and is no more than everything at once. */
START_TEST(test_models_forward_invariants)
{
    static const char *const models[] = {"mlp.onnx", "cnn_bn.onnx", "gpt_decoder.onnx", "gpt2_124m.onnx"};
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        mp_graph *g;
        mp_model *mdl = load_bound(models[k], 2, &g);
        mp_schedule s;
        mp_memory m;
        mp_err err = {{0}};
        ck_assert_int_eq(mp_schedule_graph_order(g, &s, &err), 0);
        ck_assert_msg(mp_memory_analyze(g, &s, &m, &err) == 0, "%s: %s", models[k], err.msg);
        ck_assert_int_eq(m.nsteps, g->nnodes);
        int64_t max = 0, all = 0, persistent = m.totals[MP_MEM_PARAMS] + m.totals[MP_MEM_CONSTANTS] +
                                                  m.totals[MP_MEM_BUFFERS] + m.totals[MP_MEM_INPUTS];
        for (int32_t i = 0; i < m.nsteps; i++)
            if (mp_memory_live_total(&m, i) > max) max = mp_memory_live_total(&m, i);
        for (int c = 0; c < MP_MEM_COUNT; c++) all += m.totals[c];
        ck_assert_int_eq(m.peak_bytes, max);
        ck_assert_int_eq(mp_memory_live_total(&m, m.peak_step), m.peak_bytes);
        ck_assert_int_gt(m.peak_bytes, persistent);
        ck_assert_int_le(m.peak_bytes, all);
        ck_assert_int_eq(m.totals[MP_MEM_GRADS] + m.totals[MP_MEM_OPT_STATE], 0);
        ck_assert_int_gt(m.ntop, 0);
        for (int i = 1; i < m.ntop; i++) ck_assert_int_ge(m.lt.bytes[m.top[i - 1]], m.lt.bytes[m.top[i]]);
        mp_memory_free(&m);
        mp_schedule_free(&s);
        mp_onnx_close(mdl);
    }
}
END_TEST

/* ---- the command line --------------------------------------------------------- */


#define MODEL(name) MEMPLAN_SOURCE "/models/" name

START_TEST(test_cli_json_fields)
{
    /* both modes print the same fields; the training step may or may not be built yet */
    for (int inference = 0; inference < 2; inference++) {
        run_result r = inference ? RUN(MODEL("mlp.onnx"), "--batch", "4", "--json", "--inference")
                                 : RUN("memory", MODEL("mlp.onnx"), "--batch", "4", "--json");
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_str_eq(r.err, "");
        static const char *const keys[] = {"\"memory\": {", "\"peak_bytes\":", "\"peak_step\":", "\"at_peak\": {",
                                           "\"totals\": {", "\"saved_activation_bytes\":", "\"largest_live\":"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            ck_assert_msg(strstr(r.out, keys[k]), "missing %s", keys[k]);
        for (int c = 0; c < MP_MEM_COUNT; c++) {
            char key[64];
            snprintf(key, sizeof key, "\"%s\":", mp_mem_cat_names[c]);
            const char *p = strstr(r.out, "\"at_peak\"");
            ck_assert_ptr_nonnull(p);
            ck_assert_msg(strstr(p, key), "missing at_peak.%s", mp_mem_cat_names[c]);
        }
        if (inference) ck_assert_ptr_nonnull(strstr(r.out, "\"peak_bytes\": 961320"));
        run_free(&r);
    }
    /* the text form */
    run_result r = RUN(MODEL("mlp.onnx"), "--batch", "4", "--inference");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "peak              0.92 MiB at step 1 of 5"));
    ck_assert_ptr_nonnull(strstr(r.out, "largest live tensors at the peak"));
    run_free(&r);
}
END_TEST

/* The integer after "key": in the object that starts at the first `"obj": {`. */
static long long json_int(const char *doc, const char *obj, const char *key)
{
    char k[80];
    snprintf(k, sizeof k, "\"%s\": {", obj);
    const char *p = strstr(doc, k);
    ck_assert_msg(p != NULL, "no %s", obj);
    snprintf(k, sizeof k, "\"%s\": ", key);
    p = strstr(p, k);
    ck_assert_msg(p != NULL, "no %s.%s", obj, key);
    return strtoll(p + strlen(k), NULL, 10);
}

/* The training step of the MLP: one gradient per parameter, AdamW's two
 * moments, nothing for SGD; the forward activations the backward reads are saved. */
START_TEST(test_cli_training_step)
{
    run_result r = RUN(MODEL("mlp.onnx"), "--batch", "4", "--json", "--optimizer", "adamw");
    ck_assert_msg(r.status == 0, "%s", r.err);
    if (strstr(r.out, "\"training\": false")) { /* the training pass is not in this build */
        run_free(&r);
        return;
    }
    long long params = json_int(r.out, "totals", "parameters");
    ck_assert_int_eq(params, 235146 * 4);
    ck_assert_int_eq(json_int(r.out, "totals", "gradients"), params);
    /* two moments and a 4-byte step counter per parameter tensor (6 of them) */
    ck_assert_int_eq(json_int(r.out, "totals", "optimizer_state"), 2 * params + 6 * 4);
    ck_assert_int_gt(json_int(r.out, "memory", "peak_bytes"), 4 * params);
    const char *saved = strstr(r.out, "\"saved_activation_bytes\": ");
    ck_assert_ptr_nonnull(saved);
    ck_assert_int_gt(strtoll(saved + 26, NULL, 10), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"optimizer\": \"adamw\""));
    run_free(&r);

    r = RUN(MODEL("mlp.onnx"), "--batch", "4", "--json", "--optimizer", "sgd");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(json_int(r.out, "totals", "optimizer_state"), 0);
    ck_assert_int_eq(json_int(r.out, "totals", "gradients"), 235146 * 4);
    run_free(&r);
}
END_TEST

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

START_TEST(test_cli_timeline)
{
    char path[] = "/tmp/test_memory_timelineXXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    run_result r = RUN(MODEL("gpt_decoder.onnx"), "--batch", "2", "--dim", "sequence=32", "--inference", "--timeline",
                       path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char *csv = slurp(path, NULL);
    ck_assert_ptr_nonnull(csv);
    ck_assert_int_eq(count_lines(csv), 121 + 1); /* a header, then one row per node */
    ck_assert(!strncmp(csv, "step,node,phase,total,parameters,", 33));
    ck_assert_ptr_nonnull(strstr(csv, "\n0,\""));
    free(csv);
    unlink(path);
    run_free(&r);

    /* the training step's timeline has one row per node of the step (its phases;
     * "nodes" counts the model's) */
    r = RUN(MODEL("cnn_bn.onnx"), "--batch", "2", "--json", "--timeline", path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    long long steps = 0;
    static const char *const phases[] = {"forward", "loss", "backward", "optimizer"};
    for (int p = 0; p < 4; p++) steps += json_int(r.out, "phases", phases[p]);
    ck_assert_int_gt(json_int(r.out, "phases", "backward"), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\n  \"nodes\": 10,"));
    csv = slurp(path, NULL);
    ck_assert_ptr_nonnull(csv);
    ck_assert_int_eq(count_lines(csv), steps + 1);
    free(csv);
    unlink(path);
    run_free(&r);

    /* a directory that does not exist: exit 2, no output, no file left */
    r = RUN(MODEL("mlp.onnx"), "--batch", "2", "--inference", "--timeline", "/nonexistent-dir/t.csv");
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.out, "");
    ck_assert_int_eq(count_lines(r.err), 1);
    run_free(&r);
}
END_TEST

START_TEST(test_cli_bad_flags)
{
    static const char *const bad[][8] = {
        {MODEL("mlp.onnx"), "--batch", "2", "--optimizer", "lion", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--precision", "fp8", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--loss", "hinge", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--micro-batches", "0", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--micro-batches", "100000", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--optimizer", "sgd", "--optimizer", "adam", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--timeline", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--no-such-flag", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--inference", "--optimizer", "adam", NULL},
        {"memory", MODEL("mlp.onnx"), "--batch", "two", NULL},
        {MODEL("mlp.onnx"), NULL}, /* batch unbound: planning needs it */
        {MODEL("no-such-model.onnx"), "--batch", "2", NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        run_result r = run_args(bad[k]);
        ck_assert_msg(r.status == 2, "case %d: status %d", (int)k, r.status);
        ck_assert_str_eq(r.out, "");
        ck_assert_msg(count_lines(r.err) == 1 && !strncmp(r.err, "memplan: ", 9), "case %d: %s", (int)k, r.err);
        if (k == 10) ck_assert_msg(strstr(r.err, "'batch'"), "%s", r.err);
        run_free(&r);
    }
    run_result r = RUN("memory", "--help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "--optimizer NAME"));
    ck_assert_ptr_nonnull(strstr(r.out, "--timeline FILE.csv"));
    run_free(&r);
}
END_TEST

/* Weights given as graph inputs: --data-inputs names the data, the rest are parameters. */
START_TEST(test_cli_params_as_inputs)
{
    const char *path = MEMPLAN_SHARED "/models/torch/resnet50_train_noparams.onnx";
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("skip: %s absent\n", path);
        return;
    }
    fclose(f);
    run_result r = RUN(path, "--data-inputs", "input", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(json_int(r.out, "totals", "parameters"), 4LL * 25557032); /* PyTorch's count, fp32 */
    ck_assert_int_eq(json_int(r.out, "totals", "gradients"), 4LL * 25557032);
    run_free(&r);
    r = RUN(path, "--data-inputs", "nothing");
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
}
END_TEST

/* A model with a Loop body is refused, naming the node, rather than planned without its body. */
START_TEST(test_cli_refuses_subgraphs)
{
    const char *loop = MEMPLAN_SHARED "/onnx-backend/node/test_loop11/model.onnx";
    FILE *f = fopen(loop, "rb");
    if (!f) {
        printf("skip: %s absent\n", loop);
        return;
    }
    fclose(f);
    run_result r = RUN(loop, "--inference");
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.out, "");
    ck_assert_msg(strstr(r.err, "'Loop_0' (Loop) has a subgraph body"), "%s", r.err);
    run_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *t = tcase_create("lifetimes");
    tcase_add_test(t, test_chain_lifetimes);
    tcase_add_test(t, test_alias_not_double_counted);
    tcase_add_test(t, test_training_step);
    tcase_add_test(t, test_schedule_check_and_unbound);
    tcase_add_test(t, test_classify_inputs);
    suite_add_tcase(s, t);
    t = tcase_create("models");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_mlp_forward_exact);
    tcase_add_test(t, test_models_forward_invariants);
    suite_add_tcase(s, t);
    t = tcase_create("cli");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_cli_json_fields);
    tcase_add_test(t, test_cli_timeline);
    tcase_add_test(t, test_cli_training_step);
    tcase_add_test(t, test_cli_bad_flags);
    tcase_add_test(t, test_cli_refuses_subgraphs);
    tcase_add_test(t, test_cli_params_as_inputs);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
