/* test_viz.c - the pictures (codegen/viz.h): the lifetime graph in DOT (one
 * node per op, edges labelled with size and live interval, the peak marked),
 * the layer and stage levels on gpt_decoder, the SVG timeline (well-formed,
 * one band per category, the budget and store-everything lines, small at 30k
 * steps), PNG output, a plan shown through mp_remat_apply's copies, the HTML
 * report, and the command-line flags. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/viz.h"
#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/memory.h"
#include "passes/remat.h"   /* mp_rsched, mp_remat_apply: a plan's rewritten graph */
#include "passes/schedule.h"
#include "passes/train.h"
#include "run_memplan.h"    /* defines: RUN, run_result, run_free, slurp */

#define MODEL(f) MEMPLAN_SOURCE "/models/" f

/* ---- a model's training step, analyzed ---------------------------------------- */

typedef struct step {
    mp_model *model;
    mp_graph *g;
    mp_schedule s;
    mp_memory m;
} step;

static void step_load(step *st, const char *path, int64_t batch, const char *sym, int64_t symval, bool training)
{
    mp_err err = {{0}};
    memset(st, 0, sizeof *st);
    st->model = mp_onnx_load(path, &err);
    ck_assert_msg(st->model, "%s", err.msg);
    st->g = st->model->graph;
    mp_bindings b = {.batch = batch, .nnamed = sym ? 1 : 0, .names = &sym, .values = &symval};
    ck_assert_msg(!mp_bind_dims(st->g, &b, &err) && !mp_infer(st->g, &err), "%s", err.msg);
    mp_train_opts o = mp_train_defaults();
    if (training) ck_assert_msg(!mp_train_build(st->g, &o, &err), "%s", err.msg);
    else ck_assert_msg(!mp_train_classify(st->g, &o, &err), "%s", err.msg);
    ck_assert_msg(!mp_schedule_graph_order(st->g, &st->s, &err), "%s", err.msg);
    ck_assert_msg(!mp_memory_analyze(st->g, &st->s, &st->m, &err), "%s", err.msg);
}

static void step_free(step *st)
{
    mp_memory_free(&st->m);
    mp_schedule_free(&st->s);
    mp_onnx_close(st->model);
}

static char *tmp_path(const char *suffix)
{
    static int k;
    char *p = malloc(256);
    snprintf(p, 256, "/tmp/test_viz_%d_%d%s", (int)getpid(), k++, suffix);
    return p;
}

/* Writes the graph and returns the file's text. */
static char *graph_text(const mp_viz_input *in, mp_viz_level level, mp_viz_format fmt, size_t *len)
{
    char *path = tmp_path(fmt == MP_VIZ_DOT ? ".dot" : fmt == MP_VIZ_SVG ? ".svg" : ".png");
    mp_err err = {{0}};
    ck_assert_msg(!mp_viz_write_graph(in, level, fmt, path, &err), "%s", err.msg);
    char *t = slurp(path, len);
    ck_assert_ptr_nonnull(t);
    unlink(path);
    free(path);
    return t;
}

/* ---- reading agwrite's DOT ---------------------------------------------------- */

/* One statement of the DOT text: a node "nK" or an edge "nA -> nB" with its
 * attribute list. Statements start on a line "\t<id>" and end at "];". */
typedef struct stmt {
    char head[64];
    const char *attrs, *end;
} stmt;

static int dot_statements(const char *dot, stmt *out, int cap)
{
    int n = 0;
    for (const char *p = dot; (p = strstr(p, "\n\t")) && n < cap;) {
        while (*++p == '\t') {} /* statements in clusters are indented deeper */
        if ((*p != 'n' && *p != 's') || p[1] < '0' || p[1] > '9') continue; /* ids: n<k> ops, s<k> stages */
        const char *e = strstr(p, "];");
        const char *br = strchr(p, '[');
        if (!e || !br || br > e) continue;
        size_t h = (size_t)(br - p);
        while (h && (p[h - 1] == '\t' || p[h - 1] == ' ')) h--;
        if (h >= sizeof out[n].head) continue;
        memcpy(out[n].head, p, h);
        out[n].head[h] = 0;
        out[n].attrs = br;
        out[n].end = e;
        n++;
        p = e;
    }
    return n;
}

static bool stmt_has(const stmt *s, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = s->attrs; p + n <= s->end; p++)
        if (!strncmp(p, needle, n)) return true;
    return false;
}

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

#define MAX_STMTS 20000

/* ---- the lifetime graph ----------------------------------------------------------- */

START_TEST(test_mlp_dot)
{
    step st;
    step_load(&st, MODEL("mlp.onnx"), 4, NULL, 0, true);
    mp_viz_input in = mp_viz_input_of(st.g, &st.m);
    size_t len;
    char *dot = graph_text(&in, MP_VIZ_LEVEL_OP, MP_VIZ_DOT, &len);
    ck_assert(!strncmp(dot, "digraph lifetime {", 18));
    stmt *s = malloc(sizeof *s * MAX_STMTS);
    int n = dot_statements(dot, s, MAX_STMTS);
    int nodes = 0, edges = 0, peaks = 0;
    for (int i = 0; i < n; i++) {
        if (strstr(s[i].head, "->")) {
            edges++;
            /* size and live interval in every label */
            ck_assert_msg(stmt_has(&s[i], "label=") && (stmt_has(&s[i], " B [") || stmt_has(&s[i], "KiB [") ||
                                                        stmt_has(&s[i], "MiB [")),
                          "edge %s has no size label", s[i].head);
            continue;
        }
        nodes++;
        if (stmt_has(&s[i], "id=peak")) {
            peaks++;
            char want[32];
            snprintf(want, sizeof want, "n%d", (int)st.m.peak_node);
            ck_assert_str_eq(s[i].head, want);
            ck_assert(stmt_has(&s[i], "color=\"#d62728\""));
            ck_assert(stmt_has(&s[i], "penwidth=3"));
            ck_assert(stmt_has(&s[i], "PEAK"));
        }
    }
    ck_assert_int_eq(nodes, st.g->nnodes);
    ck_assert_int_eq(peaks, 1);
    /* one edge per produced tensor and distinct reader */
    int want_edges = 0;
    for (int32_t v = 0; v < st.g->nvalues; v++) {
        const mp_value *x = &st.g->values[v];
        if (x->producer < 0) continue;
        for (int32_t k = 0; k < x->ncons; k++) {
            bool dup = false;
            for (int32_t j = 0; j < k; j++) dup |= x->cons[j] == x->cons[k];
            want_edges += !dup;
        }
    }
    ck_assert_int_eq(edges, want_edges);
    /* /relu1/Relu_output_0 (4 x 256 floats) lives from its producer to the last backward reader */
    int32_t relu = mp_graph_find(st.g, "/relu1/Relu_output_0");
    ck_assert_int_ge(relu, 0);
    char label[96];
    snprintf(label, sizeof label, "/relu1/Relu_output_0\\n4.0 KiB [%d,%d]", (int)st.m.lt.start[relu],
             (int)st.m.lt.end[relu]);
    ck_assert_msg(strstr(dot, label), "no label %s", label);
    ck_assert_int_gt(st.m.lt.end[relu], st.m.lt.start[relu] + 5);
    ck_assert_int_eq(count_of(dot, "subgraph cluster"), 0);
    free(s);
    free(dot);
    step_free(&st);
}
END_TEST

/* Nodes and clusters of a DOT text. */
static void dot_counts(const char *dot, int *nodes, int *edges, int *clusters)
{
    stmt *s = malloc(sizeof *s * MAX_STMTS);
    int n = dot_statements(dot, s, MAX_STMTS);
    *nodes = *edges = 0;
    for (int i = 0; i < n; i++) {
        if (strstr(s[i].head, "->")) (*edges)++;
        else (*nodes)++;
    }
    *clusters = count_of(dot, "subgraph cluster_");
    free(s);
}

START_TEST(test_levels_gpt_decoder)
{
    step st;
    step_load(&st, MODEL("gpt_decoder.onnx"), 2, "sequence", 16, true);
    mp_viz_input in = mp_viz_input_of(st.g, &st.m);
    ck_assert_int_le(st.g->nnodes, MP_VIZ_OP_MAX_NODES);
    ck_assert_int_eq(mp_viz_level_auto(st.g), MP_VIZ_LEVEL_OP);
    int n[3], e[3], c[3];
    for (int l = 0; l < 3; l++) {
        char *dot = graph_text(&in, (mp_viz_level)l, MP_VIZ_DOT, NULL);
        dot_counts(dot, &n[l], &e[l], &c[l]);
        if (l == MP_VIZ_LEVEL_LAYER) {
            ck_assert_ptr_nonnull(strstr(dot, "label=\"/blocks.0/attn\""));
            ck_assert_ptr_nonnull(strstr(dot, "label=\"grad/blocks.1/mlp/c_fc\""));
        }
        if (l == MP_VIZ_LEVEL_STAGE) ck_assert_ptr_nonnull(strstr(dot, " tensors\\n"));
        ck_assert_int_eq(count_of(dot, "id=peak"), 1);
        free(dot);
    }
    ck_assert_int_eq(n[MP_VIZ_LEVEL_OP], st.g->nnodes);
    ck_assert_int_eq(c[MP_VIZ_LEVEL_OP], 0);
    /* layer: the same ops in clusters, so fewer boxes at the top level */
    ck_assert_int_eq(n[MP_VIZ_LEVEL_LAYER], st.g->nnodes);
    ck_assert_int_ge(c[MP_VIZ_LEVEL_LAYER], 8);
    /* stage: one box per scope */
    ck_assert_int_lt(n[MP_VIZ_LEVEL_STAGE] * 4, st.g->nnodes);
    ck_assert_int_ge(n[MP_VIZ_LEVEL_STAGE], c[MP_VIZ_LEVEL_LAYER]);
    ck_assert_int_lt(e[MP_VIZ_LEVEL_STAGE], e[MP_VIZ_LEVEL_OP]);
    ck_assert_int_eq(c[MP_VIZ_LEVEL_STAGE], 0);

    /* every level lays out and renders */
    for (int l = 0; l < 3; l++) {
        char *svg;
        size_t len;
        mp_err err = {{0}};
        ck_assert_msg(!mp_viz_graph_svg(&in, (mp_viz_level)l, &svg, &len, &err), "%s", err.msg);
        ck_assert(!strncmp(svg, "<svg", 4));
        ck_assert_ptr_nonnull(strstr(svg, "</svg>"));
        ck_assert_ptr_nonnull(strstr(svg, "id=\"peak\""));
        free(svg);
    }
    step_free(&st);
}
END_TEST

/* Above MP_VIZ_OP_MAX_NODES the layer level leaves out the shape arithmetic. */
START_TEST(test_layer_prunes_big_graphs)
{
    step st;
    step_load(&st, MODEL("gpt2_124m.onnx"), 1, "sequence", 64, true);
    ck_assert_int_gt(st.g->nnodes, MP_VIZ_OP_MAX_NODES);
    ck_assert_int_eq(mp_viz_level_auto(st.g), MP_VIZ_LEVEL_LAYER);
    mp_viz_input in = mp_viz_input_of(st.g, &st.m);
    char *dot = graph_text(&in, MP_VIZ_LEVEL_AUTO, MP_VIZ_DOT, NULL);
    int n, e, c;
    dot_counts(dot, &n, &e, &c);
    int small = 0;
    for (int32_t i = 0; i < st.g->nnodes; i++) {
        const mp_node *nd = &st.g->nodes[i];
        bool all_small = nd->phase != MP_PHASE_LOSS && i != st.m.peak_node;
        for (int32_t k = 0; k < nd->nout; k++)
            if (nd->out[k] >= 0 && st.g->values[nd->out[k]].bytes > MP_VIZ_SMALL_BYTES) all_small = false;
        small += all_small;
    }
    ck_assert_int_gt(small, 0);
    ck_assert_int_eq(n, st.g->nnodes - small);
    ck_assert_int_gt(c, 12);
    ck_assert_int_eq(count_of(dot, "id=peak"), 1);
    free(dot);
    step_free(&st);
}
END_TEST

START_TEST(test_png_signature)
{
    step st;
    step_load(&st, MODEL("mlp.onnx"), 4, NULL, 0, true);
    mp_viz_input in = mp_viz_input_of(st.g, &st.m);
    size_t len;
    char *png = graph_text(&in, MP_VIZ_LEVEL_AUTO, MP_VIZ_PNG, &len);
    ck_assert_int_gt(len, 1000);
    ck_assert(!memcmp(png, "\x89PNG\r\n\x1a\n", 8));
    free(png);
    /* a directory that does not exist: an error naming the file, nothing left */
    mp_err err = {{0}};
    ck_assert_int_eq(mp_viz_write_graph(&in, MP_VIZ_LEVEL_OP, MP_VIZ_PNG, "/nonexistent-dir/g.png", &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent-dir/g.png"));
    step_free(&st);
}
END_TEST

/* ---- the timeline ------------------------------------------------------------------ */

/* Crude XML check: every element closed in order; skips the prolog, comments and text. */
static bool xml_balanced(const char *s, int *elements)
{
    const char *stack[256];
    size_t lens[256];
    int depth = 0;
    *elements = 0;
    for (const char *p = s; (p = strchr(p, '<'));) {
        if (!strncmp(p, "<?", 2)) {
            p = strstr(p, "?>");
            if (!p) return false;
            continue;
        }
        if (!strncmp(p, "<!--", 4)) {
            p = strstr(p, "-->");
            if (!p) return false;
            continue;
        }
        const char *e = strchr(p, '>');
        if (!e) return false;
        if (p[1] == '/') {
            size_t n = strcspn(p + 2, " >");
            if (!depth || lens[depth - 1] != n || strncmp(stack[depth - 1], p + 2, n)) return false;
            depth--;
        } else {
            (*elements)++;
            if (e[-1] != '/') {
                if (depth == 256) return false;
                stack[depth] = p + 1;
                lens[depth++] = strcspn(p + 1, " />\n");
            }
        }
        p = e + 1;
    }
    return depth == 0;
}

static char *timeline_text(const mp_viz_input *in, size_t *len)
{
    char *path = tmp_path(".svg");
    mp_err err = {{0}};
    ck_assert_msg(!mp_viz_write_timeline(in, path, &err), "%s", err.msg);
    char *t = slurp(path, len);
    ck_assert_ptr_nonnull(t);
    unlink(path);
    free(path);
    return t;
}

START_TEST(test_timeline_svg)
{
    step st;
    step_load(&st, MODEL("mlp.onnx"), 4, NULL, 0, true);
    mp_viz_input in = mp_viz_input_of(st.g, &st.m);

    /* the bands add up to the memory analysis, step by step */
    int64_t *live;
    mp_err err = {{0}};
    ck_assert(!mp_viz_profile(&in, &live, &err));
    for (int32_t i = 0; i < st.m.nsteps; i++) {
        int64_t t = 0;
        for (int c = 0; c < MP_VIZ_CAT_COUNT; c++) t += live[(size_t)i * MP_VIZ_CAT_COUNT + c];
        ck_assert_int_eq(t, mp_memory_live_total(&st.m, i));
        ck_assert_int_eq(live[(size_t)i * MP_VIZ_CAT_COUNT + MP_VIZ_CAT_RECOMPUTED], 0);
    }
    ck_assert_int_gt(live[(size_t)st.m.peak_step * MP_VIZ_CAT_COUNT + MP_VIZ_CAT_OPT_STATE], 0);
    free(live);

    size_t len;
    char *svg = timeline_text(&in, &len);
    int elements;
    ck_assert(!strncmp(svg, "<?xml", 5));
    ck_assert_msg(xml_balanced(svg, &elements), "unbalanced SVG");
    ck_assert_int_gt(elements, 50);
    ck_assert_int_eq(count_of(svg, "class=\"tl-cat\""), MP_VIZ_CAT_COUNT);
    for (int c = 0; c < MP_VIZ_CAT_COUNT; c++) {
        char id[64];
        snprintf(id, sizeof id, "<path class=\"tl-cat\" id=\"tl-cat-%s\"", mp_viz_cat_names[c]);
        ck_assert_msg(strstr(svg, id), "no band %s", mp_viz_cat_names[c]);
    }
    ck_assert_ptr_null(strstr(svg, "id=\"tl-budget\""));
    ck_assert_ptr_null(strstr(svg, "id=\"tl-store-all\""));
    ck_assert_ptr_nonnull(strstr(svg, "id=\"tl-peak\""));
    ck_assert_ptr_nonnull(strstr(svg, "id=\"tl-phase-backward\""));
    ck_assert_ptr_nonnull(strstr(svg, "id=\"tl-phase-optimizer\""));
    free(svg);

    in.budget_bytes = 3 << 20;
    in.store_all_peak = 5 << 20;
    svg = timeline_text(&in, &len);
    ck_assert(xml_balanced(svg, &elements));
    const char *b = strstr(svg, "id=\"tl-budget\"");
    ck_assert_ptr_nonnull(b);
    const char *b_end = strstr(b, "</g>");
    ck_assert_ptr_nonnull(b_end);
    const char *dash = strstr(b, "dasharray");
    ck_assert(!dash || dash > b_end); /* the budget is solid */
    const char *sa = strstr(svg, "id=\"tl-store-all\"");
    ck_assert_ptr_nonnull(sa);
    ck_assert_ptr_nonnull(strstr(sa, "stroke-dasharray=\"6 4\""));
    ck_assert_ptr_nonnull(strstr(svg, "budget 3.00 MiB"));
    ck_assert_ptr_nonnull(strstr(svg, "store everything 5.00 MiB"));
    free(svg);
    step_free(&st);
}
END_TEST

/* 30,000 steps: a chain of 1 KiB tensors, one big one in the middle. The
 * picture keeps one column per pixel (the largest step it covers). */
START_TEST(test_timeline_30k_steps)
{
    enum { N = 30000 };
    mp_graph *g = mp_graph_new(NULL);
    int32_t prev = mp_graph_add_value(g, "x");
    mp_value_set(g, prev, MP_FLOAT, 1, (mp_dim[]){mp_dim_of(256)});
    g->values[prev].flags |= MP_VAL_INPUT;
    g->inputs = mp_arena_dup(g->arena, &prev, sizeof prev);
    g->ninputs = 1;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "v%d", i);
        int32_t v = mp_graph_add_value(g, name);
        mp_value_set(g, v, MP_FLOAT, 1, (mp_dim[]){mp_dim_of(i == N / 2 ? 1 << 20 : 256)});
        snprintf(name, sizeof name, "/chain/n%d", i);
        mp_graph_add_node(g, name, "Relu", "", 1, &prev, 1, &v);
        prev = v;
    }
    g->values[prev].flags |= MP_VAL_OUTPUT;
    g->outputs = mp_arena_dup(g->arena, &prev, sizeof prev);
    g->noutputs = 1;
    mp_err err = {{0}};
    mp_schedule s;
    mp_memory m;
    ck_assert(!mp_graph_link(g, &err));
    ck_assert(!mp_schedule_graph_order(g, &s, &err));
    ck_assert_msg(!mp_memory_analyze(g, &s, &m, &err), "%s", err.msg);
    mp_viz_input in = mp_viz_input_of(g, &m);
    size_t len;
    char *svg = timeline_text(&in, &len);
    int elements;
    ck_assert(xml_balanced(svg, &elements));
    ck_assert_int_lt(len, 400 * 1024);
    int cols = count_of(strstr(svg, "id=\"tl-hover\""), "<rect");
    ck_assert_int_le(cols, 1000);
    ck_assert_int_ge(cols, 900);
    /* the 4 MiB step is shown although its column covers 30 steps */
    ck_assert_ptr_nonnull(strstr(svg, "peak 4.00 MiB at step 15000"));
    ck_assert_ptr_nonnull(strstr(svg, "n15000 — 4.00 MiB"));
    free(svg);
    mp_memory_free(&m);
    mp_schedule_free(&s);
    mp_graph_free(g);
}
END_TEST

/* ---- a plan: the graph mp_remat_apply rewrote --------------------------------------- */

/* mlp's training step with /relu1/Relu run again before the backward reads it. */
START_TEST(test_plan_through_remat_apply)
{
    step st;
    step_load(&st, MODEL("mlp.onnx"), 4, NULL, 0, true);
    int32_t relu = mp_graph_find(st.g, "/relu1/Relu_output_0");
    int32_t relu_node = st.g->values[relu].producer;
    int32_t first_bwd = -1; /* the first backward step reading it */
    for (int32_t k = 0; k < st.g->values[relu].ncons; k++) {
        int32_t c = st.g->values[relu].cons[k];
        if (st.g->nodes[c].phase == MP_PHASE_BACKWARD && (first_bwd < 0 || st.m.lt.step_of[c] < first_bwd))
            first_bwd = st.m.lt.step_of[c];
    }
    ck_assert_int_gt(first_bwd, 0);
    mp_rsched rs = {.n = st.s.n + 1};
    rs.node = malloc(sizeof *rs.node * (size_t)rs.n);
    rs.recompute = calloc((size_t)rs.n, 1);
    for (int32_t i = 0, k = 0; i < st.s.n; i++) {
        if (i == first_bwd) {
            rs.node[k] = relu_node;
            rs.recompute[k++] = 1;
        }
        rs.node[k++] = st.s.order[i];
    }
    mp_err err = {{0}};
    mp_schedule out;
    ck_assert_msg(!mp_remat_apply(st.g, &st.s, &rs, &out, &err), "%s", err.msg);
    mp_memory m;
    ck_assert_msg(!mp_memory_analyze(st.g, &out, &m, &err), "%s", err.msg);

    uint8_t *decision = calloc((size_t)st.g->nvalues, 1);
    decision[relu] = MP_VIZ_RECOMPUTED;
    mp_viz_input in = mp_viz_input_of(st.g, &m);
    in.decision = decision;
    in.store_all_peak = st.m.peak_bytes;
    int32_t copy = mp_graph_find(st.g, "/relu1/Relu_output_0@r1");
    ck_assert_int_ge(copy, 0);
    ck_assert_int_eq(mp_viz_decision_of(&in, copy), MP_VIZ_RECOMPUTED);
    ck_assert_int_eq(mp_viz_category(&in, copy), MP_VIZ_CAT_RECOMPUTED);

    /* the copy is a band of its own while it lives; the original dies after the forward */
    int64_t *live;
    ck_assert(!mp_viz_profile(&in, &live, &err));
    int32_t at = m.lt.start[copy];
    ck_assert_int_eq(at, first_bwd);
    ck_assert_int_eq(live[(size_t)at * MP_VIZ_CAT_COUNT + MP_VIZ_CAT_RECOMPUTED], 4096);
    ck_assert_int_lt(m.lt.end[relu], first_bwd);
    free(live);

    char *dot = graph_text(&in, MP_VIZ_LEVEL_OP, MP_VIZ_DOT, NULL);
    ck_assert_int_eq(count_of(dot, "fillcolor=\"#fdd9b5\""), 1); /* the recompute node */
    ck_assert_int_ge(count_of(dot, "color=\"#e8710a\""), 2);     /* its tensor's edges, and the original's */
    free(dot);
    size_t len;
    char *svg = timeline_text(&in, &len);
    ck_assert_int_eq(count_of(svg, "<title>recompute</title>"), 1);
    ck_assert_ptr_nonnull(strstr(svg, "id=\"tl-store-all\""));
    free(svg);

    char *path = tmp_path(".html");
    mp_viz_baseline base[] = {{"none", st.m.peak_bytes, 0}, {"plan", m.peak_bytes, 1.5e-6}};
    in.baselines = base;
    in.nbaselines = 2;
    in.budget_bytes = st.m.peak_bytes;
    ck_assert_msg(!mp_viz_write_report(&in, MP_VIZ_LEVEL_AUTO, path, &err), "%s", err.msg);
    char *html = slurp(path, NULL);
    ck_assert_ptr_nonnull(html);
    ck_assert_ptr_nonnull(strstr(html, "<table id=\"baselines\""));
    ck_assert_ptr_nonnull(strstr(html, "<td>plan</td>"));
    ck_assert_ptr_nonnull(strstr(html, "/relu1/Relu_output_0@r1</td>"));
    ck_assert_ptr_nonnull(strstr(html, "<td class=\"d-recomputed\">recomputed</td>"));
    ck_assert_ptr_nonnull(strstr(html, ", 2 recomputed,")); /* the original (decision) and its copy */
    free(html);
    unlink(path);
    free(path);
    free(decision);
    mp_memory_free(&m);
    mp_schedule_free(&out);
    free(rs.node);
    free(rs.recompute);
    step_free(&st);
}
END_TEST

/* ---- the report ---------------------------------------------------------------------- */

START_TEST(test_report_html)
{
    step st;
    step_load(&st, MODEL("gpt_decoder.onnx"), 2, "sequence", 16, true);
    mp_viz_input in = mp_viz_input_of(st.g, &st.m);
    in.title = "gpt_decoder <test> & co";
    char *path = tmp_path(".html");
    mp_err err = {{0}};
    ck_assert_msg(!mp_viz_write_report(&in, MP_VIZ_LEVEL_AUTO, path, &err), "%s", err.msg);
    char *html = slurp(path, NULL);
    ck_assert_ptr_nonnull(html);
    ck_assert(!strncmp(html, "<!DOCTYPE html>", 15));
    static const char *const ids[] = {"<table id=\"summary\"", "<table id=\"breakdown\"", "<div id=\"timeline\"",
                                      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"timeline-svg\"",
                                      "<div id=\"graph\"", "<table id=\"decisions\"", "id=\"viz-status\""};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) ck_assert_msg(strstr(html, ids[i]), "no %s", ids[i]);
    ck_assert_ptr_null(strstr(html, "id=\"baselines\"")); /* none given */
    ck_assert_ptr_nonnull(strstr(html, "gpt_decoder &lt;test&gt; &amp; co"));
    ck_assert_ptr_null(strstr(html, "<?xml"));            /* the SVGs are inline elements */
    ck_assert_ptr_null(strstr(html, "src="));              /* self-contained */
    ck_assert_ptr_null(strstr(html, "<link"));
    /* one row per buffer that holds memory */
    int rows = 0;
    for (int32_t v = 0; v < st.g->nvalues; v++) rows += st.m.lt.owner[v] == v && st.m.lt.start[v] >= 0;
    const char *table = strstr(html, "<table id=\"decisions\"");
    ck_assert_int_eq(count_of(table, "<tr><td>"), rows);
    ck_assert_int_eq(count_of(table, "<td class=\"d-kept\">kept</td>"), rows);
    free(html);
    unlink(path);

    /* failure: nothing left behind */
    ck_assert_int_eq(mp_viz_write_report(&in, MP_VIZ_LEVEL_AUTO, "/nonexistent-dir/r.html", &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent-dir/r.html"));
    free(path);
    step_free(&st);
}
END_TEST

/* ---- the command line ------------------------------------------------------------------ */

static bool file_ok(const char *path, const char *prefix)
{
    size_t n;
    char *t = slurp(path, &n);
    bool ok = t && n > strlen(prefix) && !memcmp(t, prefix, strlen(prefix));
    free(t);
    return ok;
}

START_TEST(test_cli_flags)
{
    char *dot = tmp_path(".dot"), *svg = tmp_path(".svg"), *png = tmp_path(".png"), *html = tmp_path(".html"),
         *tl = tmp_path(".svg"), *csv = tmp_path(".csv");
    run_result r = RUN(MODEL("mlp.onnx"), "--batch", "4", "--dot", dot, "--svg", svg, "--png", png, "--report", html,
                       "--timeline", tl);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, "");
    char line[300];
    const char *paths[] = {tl, dot, svg, png, html};
    for (int i = 0; i < 5; i++) {
        snprintf(line, sizeof line, "wrote             %s\n", paths[i]);
        ck_assert_msg(strstr(r.out, line), "no '%s' in %s", line, r.out);
    }
    ck_assert(file_ok(dot, "digraph lifetime"));
    ck_assert(file_ok(svg, "<?xml"));
    ck_assert(file_ok(png, "\x89PNG"));
    ck_assert(file_ok(html, "<!DOCTYPE html>"));
    ck_assert(file_ok(tl, "<?xml"));
    struct stat sb;
    ck_assert(!stat(html, &sb));
    ck_assert_int_eq(sb.st_mode & 0044, 0044); /* as fopen would make it, not mkstemp's 0600 */
    run_free(&r);
    for (int i = 0; i < 5; i++) unlink(paths[i]);

    /* --timeline FILE.csv keeps the CSV; --dot-level picks the level; --json stays pure JSON */
    r = RUN(MODEL("gpt_decoder.onnx"), "--batch", "2", "--dim", "sequence=16", "--timeline", csv, "--dot", dot,
            "--dot-level", "stage", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(r.out[0] == '{' && !strstr(r.out, "wrote"));
    ck_assert(file_ok(csv, "step,node,phase,total"));
    char *d = slurp(dot, NULL);
    ck_assert_ptr_nonnull(strstr(d, "(stage level)"));
    free(d);
    run_free(&r);
    unlink(csv);
    unlink(dot);

    /* usage and write errors: exit 2, one line, no stdout, no file */
    static const char *const bad[][8] = {
        {MODEL("mlp.onnx"), "--batch", "2", "--dot-level", "module", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--dot", "a.dot", "--dot", "b.dot", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--report", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--report", "/nonexistent-dir/r.html", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--png", "/nonexistent-dir/g.png", NULL},
        {MODEL("mlp.onnx"), "--batch", "2", "--timeline", "/nonexistent-dir/t.svg", NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        r = run_args(bad[k]);
        ck_assert_msg(r.status == 2, "case %d: status %d", (int)k, r.status);
        ck_assert_str_eq(r.out, "");
        ck_assert_msg(!strncmp(r.err, "memplan: ", 9) && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
                      "case %d: %s", (int)k, r.err);
        run_free(&r);
    }
    r = RUN("memory", "--help");
    ck_assert_ptr_nonnull(strstr(r.out, "--report FILE.html"));
    ck_assert_ptr_nonnull(strstr(r.out, "--dot-level L"));
    run_free(&r);
    free(dot), free(svg), free(png), free(html), free(tl), free(csv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("viz");
    TCase *t = tcase_create("graph");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_mlp_dot);
    tcase_add_test(t, test_levels_gpt_decoder);
    tcase_add_test(t, test_layer_prunes_big_graphs);
    tcase_add_test(t, test_png_signature);
    suite_add_tcase(s, t);
    t = tcase_create("timeline");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_timeline_svg);
    tcase_add_test(t, test_timeline_30k_steps);
    suite_add_tcase(s, t);
    t = tcase_create("plan and report");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_plan_through_remat_apply);
    tcase_add_test(t, test_report_html);
    tcase_add_test(t, test_cli_flags);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
