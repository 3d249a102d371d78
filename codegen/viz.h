/* viz.h - pictures of a schedule's memory: the lifetime graph (Graphviz),
 * the memory timeline (SVG) and one self-contained HTML report.
 *
 *   mp_viz_input in = mp_viz_input_of(g, &mem);   // mem: mp_memory_analyze of g's schedule
 *   in.title = "model.onnx";
 *   in.budget_bytes = budget;                     // optional: a line on the timeline
 *   mp_viz_write_graph(&in, MP_VIZ_LEVEL_AUTO, MP_VIZ_SVG, "step.svg", &err);
 *   mp_viz_write_timeline(&in, "timeline.svg", &err);
 *   mp_viz_write_report(&in, MP_VIZ_LEVEL_AUTO, "report.html", &err);
 *
 * The pictures show the memory of the schedule given. To show a plan, pass
 * the graph mp_remat_apply rewrote (and its mp_memory): the copies it makes
 * (flag MP_VAL_RECOMPUTED) are the "recomputed" band of the timeline, their
 * nodes recompute steps, their edges orange. The optional fields of
 * mp_viz_input add what the graph cannot tell: decision (kept / recomputed /
 * not droppable per value, for the originals the plan frees early),
 * step_recompute, the budget, the store-everything peak and the baselines.
 * With none of them every tensor is "kept".
 *
 * Every file is written to a temporary file beside the target and renamed, so
 * a failure never leaves a partial file. Graphviz is linked (libcgraph builds
 * the graph, libgvc lays it out and renders it); no program is run.
 */
#ifndef MP_VIZ_H
#define MP_VIZ_H

#include <stdio.h>

#include "ir/ir.h"
#include "passes/memory.h"

/* What the plan does with a tensor. */
typedef enum mp_viz_decision {
    MP_VIZ_KEPT = 0,          /* stored from its producer to its last use (no plan: every tensor) */
    MP_VIZ_RECOMPUTED,        /* freed after its forward use, recomputed before its backward use */
    MP_VIZ_PINNED,            /* not droppable: the plan could not free it */
    MP_VIZ_DECISION_COUNT
} mp_viz_decision;

extern const char *const mp_viz_decision_names[MP_VIZ_DECISION_COUNT]; /* "kept", "recomputed", "not droppable" */

/* Timeline categories: the memory.h categories with parameters, buffers and
 * constants as one band, and recomputed tensors apart from the activations. */
typedef enum mp_viz_cat {
    MP_VIZ_CAT_PARAMS = 0,    /* parameters, buffers, constants */
    MP_VIZ_CAT_GRADS,
    MP_VIZ_CAT_OPT_STATE,
    MP_VIZ_CAT_ACTIVATIONS,
    MP_VIZ_CAT_RECOMPUTED,    /* the copies a plan recomputes (MP_VAL_RECOMPUTED), while live */
    MP_VIZ_CAT_TRANSIENT,
    MP_VIZ_CAT_INPUTS,
    MP_VIZ_CAT_COUNT
} mp_viz_cat;

/* "parameters", "gradients", "optimizer_state", "activations", "recomputed", "transient", "inputs" */
extern const char *const mp_viz_cat_names[MP_VIZ_CAT_COUNT];

/* One row of the comparison table: a baseline's (or the plan's) order, counted. */
typedef struct mp_viz_baseline {
    const char *name;         /* "none", "sqrt", "greedy", "plan", ... */
    int64_t peak_bytes;
    double recompute_cost;    /* seconds (the cost model's), < 0 when unknown */
} mp_viz_baseline;

typedef struct mp_viz_input {
    const mp_graph *g;
    const mp_memory *m;            /* mp_memory_analyze(g, schedule): lifetimes, live bytes, the peak */
    /* optional: the plan */
    const uint8_t *decision;       /* g->nvalues mp_viz_decision, NULL: every value kept */
    const uint8_t *step_recompute; /* m->nsteps: 1 where the step runs a node again, NULL: none */
    int64_t budget_bytes;          /* > 0: the budget, a solid line */
    int64_t store_all_peak;        /* > 0: the store-everything peak, a dashed line */
    const mp_viz_baseline *baselines; /* nbaselines rows for the report's comparison table */
    int nbaselines;
    /* optional: captions */
    const char *title;             /* the model path, on top of the report and the timeline */
    const char *subtitle;          /* one line about the step ("training: adamw, fp32, ...") */
} mp_viz_input;

/* Everything kept, no budget, no captions. */
mp_viz_input mp_viz_input_of(const mp_graph *g, const mp_memory *m);

/* The decision shown for value v (MP_VAL_RECOMPUTED copies are recomputed). */
mp_viz_decision mp_viz_decision_of(const mp_viz_input *in, int32_t v);
/* Whether the node runs a recomputation (step_recompute at its step, or it writes a recomputed copy). */
bool mp_viz_node_recomputes(const mp_viz_input *in, int32_t node);
/* The timeline category of v. */
mp_viz_cat mp_viz_category(const mp_viz_input *in, int32_t v);

/* Live bytes per step and timeline category: live[i * MP_VIZ_CAT_COUNT + c],
 * m->nsteps rows (malloc'ed, freed by the caller). Row sums equal
 * mp_memory_live_total(). */
int mp_viz_profile(const mp_viz_input *in, int64_t **live, mp_err *err);

/* ---- the lifetime graph (viz_dot.c) ---- */

/* op: one node per op, one edge per (tensor, reader); layer: the same nodes,
 * in one cluster per ONNX name scope (the node name up to its last '/'; a
 * backward node takes "grad" + the scope of the forward node it reads), and
 * in graphs over MP_VIZ_OP_MAX_NODES nodes without the ops whose outputs are
 * all at most MP_VIZ_SMALL_BYTES (shape arithmetic, constants); stage: one
 * node per scope, one edge per pair of scopes with the bytes that cross it. */
typedef enum mp_viz_level {
    MP_VIZ_LEVEL_AUTO = -1,
    MP_VIZ_LEVEL_OP = 0,
    MP_VIZ_LEVEL_LAYER,
    MP_VIZ_LEVEL_STAGE,
    MP_VIZ_LEVEL_COUNT
} mp_viz_level;

extern const char *const mp_viz_level_names[MP_VIZ_LEVEL_COUNT + 1]; /* "op", "layer", "stage", NULL */

#define MP_VIZ_OP_MAX_NODES 300     /* AUTO: op level up to this many nodes, layer level above */
#define MP_VIZ_REPORT_MAX_NODES 1500 /* the report draws graphs above this many nodes at stage level */
#define MP_VIZ_FAST_LAYOUT 400      /* more boxes + edges than this: bounded dot iterations, straight edges */
#define MP_VIZ_SMALL_BYTES 1024     /* layer level above MP_VIZ_OP_MAX_NODES: ops with no bigger output are left out */

typedef enum mp_viz_format { MP_VIZ_DOT = 0, MP_VIZ_SVG, MP_VIZ_PNG } mp_viz_format;

/* The level AUTO stands for in files: op up to MP_VIZ_OP_MAX_NODES nodes, else layer. */
mp_viz_level mp_viz_level_auto(const mp_graph *g);

/* Writes the lifetime graph to path: DOT (not laid out: agwrite), or SVG/PNG
 * laid out by dot (gvLayout) and rendered (gvRenderFilename). */
int mp_viz_write_graph(const mp_viz_input *in, mp_viz_level level, mp_viz_format fmt, const char *path, mp_err *err);

/* The laid-out graph as an <svg> element (no XML prolog), for embedding:
 * *svg is malloc'ed, *len bytes plus a NUL. */
int mp_viz_graph_svg(const mp_viz_input *in, mp_viz_level level, char **svg, size_t *len, mp_err *err);

/* ---- the timeline (viz_timeline.c) ---- */

/* The <svg> element (no prolog): stacked live bytes per category over the
 * steps, at most one pixel column per step (a column shows the step with the
 * most bytes among those it covers), phase boundaries, the budget and the
 * store-everything peak. Ids: tl-cat-<category> (one path each), tl-budget,
 * tl-store-all, tl-peak. */
int mp_viz_timeline_svg(const mp_viz_input *in, FILE *f, mp_err *err);
int mp_viz_write_timeline(const mp_viz_input *in, const char *path, mp_err *err);

/* ---- the report (viz_report.c) ---- */

/* One HTML page, no external resources: the summary (id "summary") and
 * breakdown ("breakdown") tables, the timeline ("timeline"), the lifetime graph
 * ("graph", at `level`; AUTO: op, layer, or stage above MP_VIZ_REPORT_MAX_NODES),
 * the per-tensor decision table ("decisions", sorted by clicking a header) and
 * the baselines ("baselines", when given). Script errors are counted in the
 * data-errors attribute of #viz-status, and data-ready="yes" is set once the
 * page script has run. */
int mp_viz_write_report(const mp_viz_input *in, mp_viz_level level, const char *path, mp_err *err);

/* ---- helpers shared by the viz_*.c files ---- */

/* A temporary file beside path (*tmp malloc'ed), or NULL after mp_fail. */
FILE *mp_viz_open_tmp(const char *path, char **tmp, mp_err *err);
/* Closes f and renames *tmp to path, or removes it (and fails) when anything
 * went wrong, `bad` included. Frees *tmp either way. */
int mp_viz_commit(FILE *f, char **tmp, const char *path, bool bad, mp_err *err);
/* Writes s with & < > " escaped. */
void mp_viz_xml_text(FILE *f, const char *s);
/* "1.25 MiB", "12.0 KiB", "48 B" into buf. */
const char *mp_viz_size_str(int64_t bytes, char buf[32]);
/* Fill colour of each timeline category ("#rrggbb"). */
extern const char *const mp_viz_cat_colors[MP_VIZ_CAT_COUNT];

#endif
