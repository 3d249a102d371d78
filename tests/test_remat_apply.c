/* test_remat_apply.c - a recompute order turned into IR (passes/remat_apply.c)
 * runs the same step: for every saved activation of the MLP and the CNN, an
 * order that drops it after the forward and recomputes it (with the values
 * that died after the forward) just before its first backward reader gives
 * bit-identical loss and parameter gradients, and the original copy's
 * lifetime ends in the forward. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/lifetime.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/train.h"
#include "runtime/exec.h"

#define MODEL(f) MEMPLAN_SOURCE "/models/" f

typedef struct step {
    mp_model *m;
    mp_graph *g;
    mp_schedule s;
    mp_exec *ex;
} step;

static uint64_t rng;
static double urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void load(step *r, const char *path, int64_t batch)
{
    mp_err err = {""};
    r->m = mp_onnx_load(path, &err);
    ck_assert_msg(r->m, "%s", err.msg);
    r->g = r->m->graph;
    mp_bindings b = {.batch = batch};
    ck_assert_msg(!mp_bind_dims(r->g, &b, &err) && !mp_infer(r->g, &err), "%s", err.msg);
    mp_train_opts o = mp_train_defaults();
    ck_assert_msg(!mp_train_build(r->g, &o, &err), "%s", err.msg);
    ck_assert_msg(!mp_schedule_graph_order(r->g, &r->s, &err), "%s", err.msg);
}

/* Keeps the loss and every optimizer input and output to the end, binds seeded
 * inputs and parameters (same seed -> same bits in every run), and runs. */
static void run(step *r)
{
    mp_err err = {""};
    mp_graph *g = r->g;
    int32_t *keep = mp_arena_alloc(g->arena, (size_t)(2 * g->nnodes + g->nvalues) * sizeof *keep), nkeep = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (n->phase == MP_PHASE_LOSS && n->nout) keep[nkeep++] = n->out[0];
        if (n->phase == MP_PHASE_OPTIMIZER && n->nin > 1) keep[nkeep++] = n->in[1];
    }
    g->outputs = keep, g->noutputs = nkeep;
    r->ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(r->ex, "%s", err.msg);
    rng = 11;
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        if (val->producer >= 0 || val->konst || !(val->role == MP_ROLE_PARAM || val->role == MP_ROLE_OPT_STATE ||
                                                  val->role == MP_ROLE_INPUT || val->role == MP_ROLE_BUFFER))
            continue;
        int64_t dims[MP_MAX_RANK];
        for (int i = 0; i < val->rank; i++) dims[i] = val->dims[i].v;
        mp_tensor *t = mp_tensor_new(g->arena, val->dtype, val->rank, dims);
        for (int64_t i = 0; i < t->numel; i++)
            if (val->dtype == MP_INT64) mp_tensor_set_i64(t, i, (int64_t)(urand() * 10));
            else if (val->role != MP_ROLE_OPT_STATE) mp_tensor_set_f64(t, i, 0.2 * (2 * urand() - 1));
        ck_assert_msg(!mp_exec_bind(r->ex, v, t, &err), "%s", err.msg);
    }
    ck_assert_msg(!mp_exec_run(r->ex, &err), "%s", err.msg);
}

static void close_step(step *r)
{
    mp_exec_free(r->ex);
    mp_schedule_free(&r->s);
    mp_onnx_close(r->m);
}

/* The order that recomputes saved value v before its first backward reader:
 * v's producer and the ancestors already dead by then, in step order. */
static int make_order(const mp_graph *g, const mp_lifetimes *lt, int32_t v, mp_rsched *rs)
{
    int32_t n = g->nnodes, first_bwd = n;
    for (int32_t k = 0; k < g->values[v].ncons; k++) {
        int32_t c = g->values[v].cons[k];
        if (g->nodes[c].phase != MP_PHASE_FORWARD && lt->step_of[c] < first_bwd) first_bwd = lt->step_of[c];
    }
    uint8_t *in = calloc((size_t)n, 1);
    int32_t stack[4096], top = 0, nrec = 0;
    stack[top++] = g->values[v].producer;
    in[g->values[v].producer] = 1;
    while (top) {
        const mp_node *p = &g->nodes[stack[--top]];
        nrec++;
        for (int32_t k = 0; k < p->nin; k++) {
            int32_t x = p->in[k];
            if (x < 0) continue;
            int32_t o = lt->owner[x], q = g->values[x].producer;
            if (q < 0 || lt->persistent[o] || lt->end[o] >= first_bwd || in[q]) continue;
            if (g->nodes[q].phase != MP_PHASE_FORWARD || top == 4096) { free(in); return -1; }
            in[q] = 1;
            stack[top++] = q;
        }
    }
    rs->n = n + nrec;
    rs->node = malloc((size_t)rs->n * sizeof *rs->node);
    rs->recompute = calloc((size_t)rs->n, 1);
    int32_t e = 0;
    for (int32_t t = 0; t < n; t++) {
        if (t == first_bwd)
            for (int32_t q = 0; q < n; q++)
                if (in[q]) rs->node[e] = lt->step_of[q], rs->recompute[e++] = 1;
        rs->node[e++] = t;
    }
    free(in);
    return 0;
}

static void same_bits(const step *a, const step *b, const char *what)
{
    int checked = 0;
    for (int32_t k = 0; k < a->g->noutputs; k++) {
        int32_t va = a->g->outputs[k], vb = mp_graph_find(b->g, a->g->values[va].name);
        ck_assert_msg(vb >= 0, "%s: no '%s' after the rewrite", what, a->g->values[va].name);
        const mp_tensor *ta = mp_exec_value(a->ex, va), *tb = mp_exec_value(b->ex, vb);
        ck_assert(ta && tb && ta->numel == tb->numel);
        ck_assert_msg(!memcmp(ta->data, tb->data, (size_t)ta->numel * mp_elem_size(ta->dtype)),
                      "%s: '%s' differs after recomputation", what, a->g->values[va].name);
        checked++;
    }
    ck_assert_int_gt(checked, 1);
}

static void check_model(const char *path, int64_t batch)
{
    step ref;
    load(&ref, path, batch);
    run(&ref);
    mp_err err = {""};
    mp_lifetimes lt;
    ck_assert_msg(!mp_lifetime_compute(ref.g, &ref.s, &lt, &err), "%s", err.msg);
    int tried = 0;
    for (int32_t v = 0; v < ref.g->nvalues; v++) {
        const mp_value *val = &ref.g->values[v];
        if (!mp_value_is_saved(ref.g, v) || val->producer < 0 || lt.owner[v] != v || val->alias >= 0 ||
            ref.g->nodes[val->producer].phase != MP_PHASE_FORWARD)
            continue;
        const mp_node *p = &ref.g->nodes[val->producer];
        bool in_place = false;
        for (int32_t k = 0; k < p->nout; k++) in_place |= p->out[k] >= 0 && ref.g->values[p->out[k]].alias >= 0;
        if (in_place) continue; /* e.g. BatchNormalization's running statistics */
        step r;
        load(&r, path, batch);
        mp_rsched rs;
        if (make_order(r.g, &lt, v, &rs)) { close_step(&r); continue; }
        mp_schedule out;
        ck_assert_msg(!mp_remat_apply(r.g, &r.s, &rs, &out, &err), "%s: %s", val->name, err.msg);
        ck_assert_int_eq(out.n, rs.n);
        /* the original copy now dies in the forward; the recomputed one serves the backward */
        mp_lifetimes lt2;
        ck_assert_msg(!mp_lifetime_compute(r.g, &out, &lt2, &err), "%s", err.msg);
        int32_t orig = mp_graph_find(r.g, val->name);
        char copy[512];
        snprintf(copy, sizeof copy, "%s@r1", val->name);
        int32_t c = mp_graph_find(r.g, copy);
        ck_assert_msg(c >= 0 && (r.g->values[c].flags & MP_VAL_RECOMPUTED), "no copy '%s'", copy);
        for (int32_t k = 0; k < r.g->values[orig].ncons; k++)
            ck_assert_msg(r.g->nodes[r.g->values[orig].cons[k]].phase == MP_PHASE_FORWARD,
                          "'%s' still read by the backward", val->name);
        ck_assert_int_lt(lt2.end[lt2.owner[orig]], lt2.start[lt2.owner[c]]);
        mp_schedule_free(&r.s);
        r.s = out;
        run(&r);
        same_bits(&ref, &r, val->name);
        mp_lifetime_free(&lt2);
        free(rs.node);
        free(rs.recompute);
        close_step(&r);
        tried++;
    }
    printf("  %s: %d saved activations recomputed, gradients bit-identical\n", path, tried);
    ck_assert_int_ge(tried, 2);
    mp_lifetime_free(&lt);
    close_step(&ref);
}

START_TEST(mlp) { check_model(MODEL("mlp.onnx"), 8); }
END_TEST

START_TEST(cnn_bn) { check_model(MODEL("cnn_bn.onnx"), 2); }
END_TEST

int main(void)
{
    Suite *s = suite_create("remat_apply");
    TCase *tc = tcase_create("apply");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, mlp);
    tcase_add_test(tc, cnn_bn);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
