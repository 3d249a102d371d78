/* viz_dot.c - the lifetime graph: ops as nodes, tensors as edges labelled
 * with their size and live interval, built with libcgraph and laid out and
 * rendered by libgvc's dot engine (in process, no program is run). */
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/viz.h"

const char *const mp_viz_level_names[MP_VIZ_LEVEL_COUNT + 1] = {"op", "layer", "stage", NULL};

static const char *const phase_fill[MP_PHASE_COUNT] = {"#dbe9f6", "#fff2cc", "#e2f0d9", "#eeeeee"};
static const char *const phase_names[MP_PHASE_COUNT] = {"forward", "loss", "backward", "optimizer"};
static const char *const decision_color[MP_VIZ_DECISION_COUNT] = {"#555555", "#e8710a", "#1f77b4"};
#define PEAK_COLOR "#d62728"
#define RECOMPUTE_FILL "#fdd9b5"
/* a scope label longer than this keeps its tail */
#define MAX_LABEL 48

mp_viz_level mp_viz_level_auto(const mp_graph *g)
{
    return g->nnodes <= MP_VIZ_OP_MAX_NODES ? MP_VIZ_LEVEL_OP : MP_VIZ_LEVEL_LAYER;
}

/* ---- name scopes ------------------------------------------------------------- */

/* Scope ids of the nodes: forward nodes by their name (/blocks/layers.3/attn/MatMul
 * is in /blocks/layers.3/attn); backward nodes, whose names carry no scope, by
 * the forward node whose output they read ("grad" + its scope), else by the
 * backward node they follow; loss and optimizer nodes one scope each. */
typedef struct scopes {
    int32_t n;
    char **name;        /* n distinct scopes, sorted; "" is the top level */
    int32_t *of_node;   /* nnodes */
} scopes;

static char *name_scope(const char *name)
{
    const char *slash = strrchr(name, '/');
    return strndup(name, slash ? (size_t)(slash - name) : 0);
}

static char *backward_scope(const mp_graph *g, char **node_scope, int32_t i)
{
    const mp_node *nd = &g->nodes[i];
    int32_t from_bwd = -1;
    for (int32_t k = 0; k < nd->nin; k++) {
        int32_t v = nd->in[k];
        int32_t p = v >= 0 ? g->values[v].producer : -1;
        if (p < 0 || p >= g->nnodes || !node_scope[p]) continue;
        if (g->nodes[p].phase == MP_PHASE_FORWARD) {
            size_t n = strlen(node_scope[p]) + 6;
            char *s = malloc(n);
            if (s) snprintf(s, n, "grad%s%s", node_scope[p][0] == '/' ? "" : "/", node_scope[p]);
            if (s && !node_scope[p][0]) s[4] = 0; /* "grad", not "grad/" */
            return s;
        }
        if (from_bwd < 0 && g->nodes[p].phase == MP_PHASE_BACKWARD) from_bwd = p;
    }
    return strdup(from_bwd >= 0 ? node_scope[from_bwd] : "grad");
}

static const char **sort_names; /* qsort has no context argument */
static int by_name(const void *a, const void *b)
{
    return strcmp(sort_names[*(const int32_t *)a], sort_names[*(const int32_t *)b]);
}

static void scopes_free(scopes *s)
{
    for (int32_t i = 0; i < s->n; i++) free(s->name[i]);
    free(s->name);
    free(s->of_node);
    memset(s, 0, sizeof *s);
}

static int scopes_build(const mp_viz_input *in, scopes *s, mp_err *err)
{
    const mp_graph *g = in->g;
    const mp_lifetimes *lt = &in->m->lt;
    memset(s, 0, sizeof *s);
    int32_t n = g->nnodes;
    char **ns = calloc((size_t)n + 1, sizeof *ns);
    int32_t *idx = malloc(sizeof *idx * ((size_t)n + 1));
    int32_t *order = malloc(sizeof *order * ((size_t)n + 1));
    s->of_node = malloc(sizeof *s->of_node * ((size_t)n + 1));
    s->name = calloc((size_t)n + 1, sizeof *s->name);
    int rc = -1;
    if (!ns || !idx || !order || !s->of_node || !s->name) goto done;
    /* in schedule order, so that a backward node's producers have their scope */
    for (int32_t i = 0; i < n; i++) order[i] = i;
    for (int32_t i = 0; i < n; i++)
        if (lt->step_of[i] >= 0 && lt->step_of[i] < n) order[lt->step_of[i]] = i;
    for (int32_t k = 0; k < n; k++) {
        int32_t i = order[k];
        const mp_node *nd = &g->nodes[i];
        switch (nd->phase) {
        case MP_PHASE_LOSS: ns[i] = strdup("loss"); break;
        case MP_PHASE_OPTIMIZER: ns[i] = strdup("optim"); break;
        case MP_PHASE_BACKWARD: ns[i] = backward_scope(g, ns, i); break;
        default: ns[i] = name_scope(nd->name ? nd->name : ""); break;
        }
        if (!ns[i]) goto done;
    }
    /* intern: sort the nodes by scope, one id per run */
    for (int32_t i = 0; i < n; i++) idx[i] = i;
    sort_names = (const char **)ns;
    qsort(idx, (size_t)n, sizeof *idx, by_name);
    for (int32_t k = 0; k < n; k++) {
        int32_t i = idx[k];
        if (!s->n || strcmp(s->name[s->n - 1], ns[i])) {
            s->name[s->n++] = ns[i];
            ns[i] = NULL;
        }
        s->of_node[i] = s->n - 1;
    }
    rc = 0;
done:
    if (ns)
        for (int32_t i = 0; i < n; i++) free(ns[i]);
    free(ns);
    free(idx);
    free(order);
    if (rc) {
        scopes_free(s);
        mp_fail(err, "out of memory");
    }
    return rc;
}

/* ---- building the graph -------------------------------------------------------- */

/* cgraph's API takes char *, never writing through it */
#define S(x) ((char *)(x))

typedef struct builder {
    const mp_viz_input *in;
    Agraph_t *g;
    Agsym_t *g_label;
    Agsym_t *n_label, *n_fill, *n_color, *n_pen, *n_font, *n_style, *n_tip, *n_id;
    Agsym_t *e_label, *e_xlabel, *e_color, *e_pen, *e_font, *e_tip;
    Agnode_t **node;  /* per mp node (op, layer; NULL when left out) or per scope (stage) */
    int32_t nhidden;
    scopes sc;
} builder;

/* Copies src into dst (cap bytes) for an escString: backslashes doubled, so
 * that names never read as Graphviz escapes. */
static void esc(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; src && *src && n + 3 < cap; src++) {
        if (*src == '\\') dst[n++] = '\\';
        dst[n++] = *src;
    }
    dst[n] = 0;
}

/* The tail of s, at most MAX_LABEL characters, with "..." when cut. */
static const char *tail(const char *s, char *buf)
{
    size_t n = strlen(s);
    if (n <= MAX_LABEL) return s;
    snprintf(buf, MAX_LABEL + 8, "...%s", s + n - (MAX_LABEL - 3));
    return buf;
}

static bool live_at_peak(const mp_viz_input *in, int32_t v)
{
    const mp_lifetimes *lt = &in->m->lt;
    int32_t o = lt->owner[v], p = in->m->peak_step;
    return o >= 0 && p >= 0 && lt->start[o] >= 0 && lt->start[o] <= p && p <= lt->end[o];
}

static void declare(builder *b)
{
    Agraph_t *g = b->g;
    agattr(g, AGRAPH, S("rankdir"), S("TB"));
    agattr(g, AGRAPH, S("fontname"), S("Helvetica"));
    agattr(g, AGRAPH, S("labelloc"), S("t"));
    agattr(g, AGRAPH, S("labeljust"), S("l"));
    agattr(g, AGRAPH, S("nodesep"), S("0.25"));
    agattr(g, AGRAPH, S("ranksep"), S("0.35"));
    b->g_label = agattr(g, AGRAPH, S("label"), S(""));
    agattr(g, AGRAPH, S("style"), S("rounded"));
    agattr(g, AGRAPH, S("color"), S("#999999"));
    agattr(g, AGNODE, S("shape"), S("box"));
    agattr(g, AGNODE, S("fontname"), S("Helvetica"));
    agattr(g, AGNODE, S("fontsize"), S("10"));
    agattr(g, AGNODE, S("margin"), S("0.05,0.02"));
    agattr(g, AGNODE, S("height"), S("0.3"));
    b->n_label = agattr(g, AGNODE, S("label"), S(""));
    b->n_style = agattr(g, AGNODE, S("style"), S("filled"));
    b->n_fill = agattr(g, AGNODE, S("fillcolor"), S("#dbe9f6"));
    b->n_color = agattr(g, AGNODE, S("color"), S("#333333"));
    b->n_pen = agattr(g, AGNODE, S("penwidth"), S("1"));
    b->n_font = agattr(g, AGNODE, S("fontcolor"), S("black"));
    b->n_tip = agattr(g, AGNODE, S("tooltip"), S(""));
    b->n_id = agattr(g, AGNODE, S("id"), S(""));
    agattr(g, AGEDGE, S("fontname"), S("Helvetica"));
    agattr(g, AGEDGE, S("fontsize"), S("8"));
    agattr(g, AGEDGE, S("arrowsize"), S("0.5"));
    b->e_label = agattr(g, AGEDGE, S("label"), S(""));
    b->e_xlabel = agattr(g, AGEDGE, S("xlabel"), S(""));
    b->e_color = agattr(g, AGEDGE, S("color"), S("#555555"));
    b->e_pen = agattr(g, AGEDGE, S("penwidth"), S("1"));
    b->e_font = agattr(g, AGEDGE, S("fontcolor"), S("#333333"));
    b->e_tip = agattr(g, AGEDGE, S("tooltip"), S(""));
}

static void mark_peak(builder *b, Agnode_t *n)
{
    agxset(n, b->n_color, S(PEAK_COLOR));
    agxset(n, b->n_font, S(PEAK_COLOR));
    agxset(n, b->n_pen, S("3"));
    agxset(n, b->n_style, S("filled,bold"));
    agxset(n, b->n_id, S("peak"));
}

static void graph_label(builder *b, mp_viz_level level)
{
    const mp_viz_input *in = b->in;
    const mp_memory *m = in->m;
    char title[300], sz[32], buf[1000], hidden[120] = "";
    esc(title, sizeof title, in->title ? in->title : "");
    if (b->nhidden)
        snprintf(hidden, sizeof hidden, " (left out: %d ops whose outputs are all at most %d bytes)", (int)b->nhidden,
                 MP_VIZ_SMALL_BYTES);
    snprintf(buf, sizeof buf,
             "%s%slifetime graph (%s level): %d %s of %d ops%s, peak %s at step %d\\l"
             "boxes: %s (blue forward, yellow loss, green backward, grey optimizer, orange recompute); "
             "red bold: the peak step\\l"
             "%s; red: live at the peak, orange: recomputed, blue: not droppable\\l",
             title, in->title ? ": " : "", mp_viz_level_names[level], (int)agnnodes(b->g),
             level == MP_VIZ_LEVEL_STAGE ? "scopes" : "nodes", (int)in->g->nnodes, hidden,
             mp_viz_size_str(m->peak_bytes, sz), (int)m->peak_step,
             level == MP_VIZ_LEVEL_STAGE ? "name scopes, by the phase of their first op" : "ops",
             level == MP_VIZ_LEVEL_STAGE ? "edges: the tensors that cross from one scope to another, their number and bytes"
                                         : "edges: tensors with size and live interval [first step, last step]");
    agxset(b->g, b->g_label, buf);
}

/* One edge per (tensor, reader) between two op nodes. with_name: the label
 * starts with the tensor's name; xlabel: the text is placed after layout
 * (edge labels inside clusters crash Graphviz 2.42: a double free in
 * dot_cleanup). */
static void tensor_edges(builder *b, bool with_name, bool xlabel)
{
    const mp_graph *g = b->in->g;
    const mp_lifetimes *lt = &b->in->m->lt;
    char buf[400], nm[300], cut[MAX_LABEL + 8], sz[32];
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *x = &g->values[v];
        if (x->producer < 0 || x->producer >= g->nnodes || x->ncons == 0) continue;
        int32_t o = lt->owner[v];
        mp_viz_decision d = mp_viz_decision_of(b->in, o >= 0 ? o : v);
        if (d == MP_VIZ_KEPT) d = mp_viz_decision_of(b->in, v);
        bool peak = live_at_peak(b->in, v);
        esc(nm, sizeof nm, tail(x->name ? x->name : "", cut));
        int len = with_name ? snprintf(buf, sizeof buf, "%s\\n", nm) : 0;
        snprintf(buf + len, sizeof buf - (size_t)len, "%s [%d,%d]", mp_viz_size_str(x->bytes > 0 ? x->bytes : 0, sz),
                 o >= 0 ? (int)lt->start[o] : -1, o >= 0 ? (int)lt->end[o] : -1);
        for (int32_t k = 0; k < x->ncons; k++) {
            int32_t c = x->cons[k];
            bool dup = false; /* Mul(x, x): one edge */
            for (int32_t j = 0; j < k && !dup; j++) dup = x->cons[j] == c;
            if (c < 0 || c >= g->nnodes || dup || !b->node[c] || !b->node[x->producer]) continue;
            Agedge_t *e = agedge(b->g, b->node[x->producer], b->node[c], NULL, 1);
            agxset(e, xlabel ? b->e_xlabel : b->e_label, buf);
            esc(nm, sizeof nm, x->name ? x->name : "");
            agxset(e, b->e_tip, nm);
            if (d != MP_VIZ_KEPT) agxset(e, b->e_color, S(decision_color[d]));
            if (peak) {
                if (d == MP_VIZ_KEPT) agxset(e, b->e_color, S(PEAK_COLOR));
                agxset(e, b->e_pen, S("2.5"));
                agxset(e, b->e_font, S(PEAK_COLOR));
            }
        }
    }
}

/* Every output at most MP_VIZ_SMALL_BYTES, outside the loss, not the peak. */
static bool small_op(const mp_viz_input *in, int32_t i)
{
    const mp_node *nd = &in->g->nodes[i];
    if (nd->phase == MP_PHASE_LOSS || i == in->m->peak_node) return false;
    for (int32_t k = 0; k < nd->nout; k++)
        if (nd->out[k] >= 0 && in->g->values[nd->out[k]].bytes > MP_VIZ_SMALL_BYTES) return false;
    return true;
}

/* op and layer levels: one node per op; layer puts each scope in a cluster. */
static int build_ops(builder *b, bool clusters)
{
    const mp_viz_input *in = b->in;
    const mp_graph *g = in->g;
    const mp_lifetimes *lt = &in->m->lt;
    Agraph_t **sub = NULL;
    if (clusters) {
        sub = calloc((size_t)b->sc.n + 1, sizeof *sub);
        if (!sub) return -1;
    }
    char id[32], buf[400], nm[300], cut[MAX_LABEL + 8], sz[32];
    /* a big graph at layer level leaves out the shape arithmetic (Shape,
     * Gather, Concat of dims, Constant): most of an export's nodes, none of
     * its memory, and what makes dot slow */
    bool prune = clusters && g->nnodes > MP_VIZ_OP_MAX_NODES;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *nd = &g->nodes[i];
        if (prune && small_op(in, i)) {
            b->nhidden++;
            continue;
        }
        snprintf(id, sizeof id, "n%d", (int)i);
        Agnode_t *n = agnode(b->g, id, 1);
        b->node[i] = n;
        const char *name = nd->name ? nd->name : "";
        int32_t sid = b->sc.of_node[i];
        if (clusters && b->sc.name[sid][0]) {
            if (!sub[sid]) {
                snprintf(id, sizeof id, "cluster_%d", (int)sid);
                sub[sid] = agsubg(b->g, id, 1);
                esc(nm, sizeof nm, tail(b->sc.name[sid], cut));
                agxset(sub[sid], b->g_label, nm);
            }
            agsubnode(sub[sid], n, 1);
            /* inside a cluster the scope is its label: show the name's last part */
            const char *slash = strrchr(name, '/');
            if (slash && !strncmp(name, b->sc.name[sid], (size_t)(slash - name))) name = slash + 1;
        }
        esc(nm, sizeof nm, tail(name, cut));
        int32_t step = lt->step_of[i];
        bool peak = i == in->m->peak_node;
        if (peak)
            snprintf(buf, sizeof buf, "%s\\nstep %d, PEAK %s", nm, (int)step, mp_viz_size_str(in->m->peak_bytes, sz));
        else
            snprintf(buf, sizeof buf, "%s\\nstep %d", nm, (int)step);
        agxset(n, b->n_label, buf);
        bool rc = mp_viz_node_recomputes(in, i);
        agxset(n, b->n_fill, S(rc ? RECOMPUTE_FILL : phase_fill[nd->phase % MP_PHASE_COUNT]));
        esc(nm, sizeof nm, nd->name ? nd->name : "");
        snprintf(buf, sizeof buf, "%s (%s), step %d, %s%s", nm, nd->op_type ? nd->op_type : "?", (int)step,
                 phase_names[nd->phase % MP_PHASE_COUNT], rc ? ", recompute" : "");
        agxset(n, b->n_tip, buf);
        if (peak) mark_peak(b, n);
    }
    free(sub);
    tensor_edges(b, !prune, clusters);
    return 0;
}

/* stage level: edges between scopes, bytes summed over the tensors that cross */
typedef struct crossing {
    int32_t from, to, value;
} crossing;

static int by_crossing(const void *pa, const void *pb)
{
    const crossing *a = pa, *b = pb;
    if (a->from != b->from) return a->from < b->from ? -1 : 1;
    if (a->to != b->to) return a->to < b->to ? -1 : 1;
    return a->value < b->value ? -1 : a->value > b->value;
}

static int build_stages(builder *b)
{
    const mp_viz_input *in = b->in;
    const mp_graph *g = in->g;
    const mp_lifetimes *lt = &in->m->lt;
    const scopes *sc = &b->sc;
    int32_t *count = calloc((size_t)sc->n + 1, sizeof *count);
    int32_t *first = malloc(sizeof *first * ((size_t)sc->n + 1));
    int32_t *last = malloc(sizeof *last * ((size_t)sc->n + 1));
    uint8_t *flags = calloc((size_t)sc->n + 1, 1); /* 1 recompute, 2 peak */
    uint8_t *phase = calloc((size_t)sc->n + 1, 1); /* of the scope's first op */
    int64_t ncross = 0;
    for (int32_t v = 0; v < g->nvalues; v++)
        if (g->values[v].producer >= 0) ncross += g->values[v].ncons;
    crossing *cr = malloc(sizeof *cr * ((size_t)ncross + 1));
    int rc = -1;
    if (!count || !first || !last || !flags || !phase || !cr) goto done;

    /* pass 1: one box per scope */
    for (int32_t s = 0; s < sc->n; s++) first[s] = INT32_MAX, last[s] = -1;
    for (int32_t i = 0; i < g->nnodes; i++) {
        int32_t s = sc->of_node[i], step = lt->step_of[i];
        count[s]++;
        if (step < first[s]) {
            first[s] = step;
            phase[s] = (uint8_t)(g->nodes[i].phase % MP_PHASE_COUNT);
        }
        if (step > last[s]) last[s] = step;
        if (mp_viz_node_recomputes(in, i)) flags[s] |= 1;
        if (i == in->m->peak_node) flags[s] |= 2;
    }
    char id[32], buf[600], nm[300], cut[MAX_LABEL + 8], sz[32];
    for (int32_t s = 0; s < sc->n; s++) {
        snprintf(id, sizeof id, "s%d", (int)s);
        Agnode_t *n = agnode(b->g, id, 1);
        b->node[s] = n;
        esc(nm, sizeof nm, sc->name[s][0] ? tail(sc->name[s], cut) : "(top level)");
        int len = snprintf(buf, sizeof buf, "%s\\n%d op%s, steps %d-%d", nm, (int)count[s], count[s] == 1 ? "" : "s",
                           (int)first[s], (int)last[s]);
        if (flags[s] & 2)
            snprintf(buf + len, sizeof buf - (size_t)len, "\\nPEAK %s at step %d", mp_viz_size_str(in->m->peak_bytes, sz),
                     (int)in->m->peak_step);
        agxset(n, b->n_label, buf);
        agxset(n, b->n_fill, S(flags[s] & 1 ? RECOMPUTE_FILL : phase_fill[phase[s]]));
        esc(nm, sizeof nm, sc->name[s]);
        agxset(n, b->n_tip, nm);
        if (flags[s] & 2) mark_peak(b, n);
    }

    /* pass 2: one crossing per (scope pair, tensor), then one edge per pair */
    int64_t k = 0;
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *x = &g->values[v];
        if (x->producer < 0 || x->producer >= g->nnodes) continue;
        for (int32_t j = 0; j < x->ncons; j++) {
            int32_t c = x->cons[j];
            if (c < 0 || c >= g->nnodes || sc->of_node[c] == sc->of_node[x->producer]) continue;
            cr[k++] = (crossing){sc->of_node[x->producer], sc->of_node[c], v};
        }
    }
    qsort(cr, (size_t)k, sizeof *cr, by_crossing);
    for (int64_t i = 0; i < k;) {
        int64_t j = i, bytes = 0;
        int32_t ntensors = 0;
        bool peak = false, recomputed = false;
        for (; j < k && cr[j].from == cr[i].from && cr[j].to == cr[i].to; j++) {
            if (j > i && cr[j].value == cr[j - 1].value) continue;
            int32_t v = cr[j].value;
            bytes += g->values[v].bytes > 0 ? g->values[v].bytes : 0;
            ntensors++;
            peak |= live_at_peak(in, v);
            recomputed |= mp_viz_decision_of(in, v) == MP_VIZ_RECOMPUTED;
        }
        Agedge_t *e = agedge(b->g, b->node[cr[i].from], b->node[cr[i].to], NULL, 1);
        snprintf(buf, sizeof buf, "%d tensor%s\\n%s", (int)ntensors, ntensors == 1 ? "" : "s", mp_viz_size_str(bytes, sz));
        agxset(e, b->e_label, buf);
        if (recomputed) agxset(e, b->e_color, S(decision_color[MP_VIZ_RECOMPUTED]));
        if (peak) {
            if (!recomputed) agxset(e, b->e_color, S(PEAK_COLOR));
            agxset(e, b->e_pen, S("2.5"));
            agxset(e, b->e_font, S(PEAK_COLOR));
        }
        i = j;
    }
    rc = 0;
done:
    free(count);
    free(first);
    free(last);
    free(flags);
    free(phase);
    free(cr);
    return rc;
}

/* Above a few hundred boxes and edges dot's network simplex (x positions)
 * and spline routing take minutes (a 190-scope stage graph of GPT-2: 25 s);
 * bounded iterations and straight edges take a fraction of a second. */
static void tune(Agraph_t *g)
{
    if (agnnodes(g) + agnedges(g) <= MP_VIZ_FAST_LAYOUT) return;
    agattr(g, AGRAPH, S("nslimit"), S("2"));
    agattr(g, AGRAPH, S("nslimit1"), S("2"));
    agattr(g, AGRAPH, S("mclimit"), S("0.1"));
    agattr(g, AGRAPH, S("searchsize"), S("10"));
    agattr(g, AGRAPH, S("splines"), S("line"));
}

/* Builds the cgraph graph of in at level (not AUTO); NULL after mp_fail. */
static Agraph_t *build(const mp_viz_input *in, mp_viz_level level, mp_err *err)
{
    builder b = {.in = in};
    if (scopes_build(in, &b.sc, err)) return NULL;
    int32_t nn = level == MP_VIZ_LEVEL_STAGE ? b.sc.n : in->g->nnodes;
    b.node = calloc((size_t)nn + 1, sizeof *b.node);
    b.g = b.node ? agopen(S("lifetime"), Agdirected, NULL) : NULL;
    int rc = -1;
    if (b.g) {
        declare(&b);
        rc = level == MP_VIZ_LEVEL_STAGE ? build_stages(&b) : build_ops(&b, level == MP_VIZ_LEVEL_LAYER);
        graph_label(&b, level);
        tune(b.g);
    }
    free(b.node);
    scopes_free(&b.sc);
    if (rc) {
        if (b.g) agclose(b.g);
        mp_fail(err, "out of memory");
        return NULL;
    }
    return b.g;
}

/* ---- rendering ------------------------------------------------------------------- */

/* Graphviz reports through agerr: keep the last message for mp_fail, print nothing. */
static char gv_msg[256];
static int gv_catch(char *msg)
{
    if (msg) {
        snprintf(gv_msg, sizeof gv_msg, "%s", msg);
        size_t n = strlen(gv_msg);
        while (n && (gv_msg[n - 1] == '\n' || gv_msg[n - 1] == ' ')) gv_msg[--n] = 0;
    }
    return 0;
}

#if defined(__SANITIZE_ADDRESS__)
/* Graphviz 2.42 leaks inside its own libraries: dot_cleanup misses virtual
 * edges (clusters, cycles), and the pango plugin keeps its font caches (with
 * fontconfig's). The fast unwinder stops at Graphviz's allocator (its
 * libraries have no frame pointers), so leaks are matched by it: gmalloc,
 * zmalloc, grealloc, and fontconfig. A leak of memplan's own stays an error. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:gmalloc\nleak:zmalloc\nleak:grealloc\nleak:libgvplugin_pango.so\nleak:libfontconfig.so\n"
           "leak:libpango\nleak:libglib-2.0.so\n";
}
/* ... and no "Suppressions used" table on stderr at exit */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }
#endif

/* One Graphviz context for the process, never freed: 2.42's pango plugin
 * caches a font name that gvFreeContext frees, and a second context reads it
 * (a use after free). */
static GVC_t *context(void)
{
    static GVC_t *gvc;
    if (!gvc) gvc = gvContext();
    return gvc;
}

typedef struct session {
    GVC_t *gvc;
    Agraph_t *g;
    agusererrf old_f;
    agerrlevel_t old_level;
    bool hooked, laid_out;
} session;

/* png: cairo bitmaps stop at 32767 pixels a side and a bigger drawing is
 * scaled with a message on stderr; a size (inches at 96 dpi) scales it first. */
static int session_open(session *s, const mp_viz_input *in, mp_viz_level level, bool layout, bool png, mp_err *err)
{
    memset(s, 0, sizeof *s);
    if (!in || !in->g || !in->m) return mp_fail(err, "lifetime graph: no memory analysis given");
    if (level == MP_VIZ_LEVEL_AUTO) level = mp_viz_level_auto(in->g);
    if (level < 0 || level >= MP_VIZ_LEVEL_COUNT) return mp_fail(err, "lifetime graph: unknown level %d", (int)level);
    gv_msg[0] = 0;
    s->old_f = agseterrf(gv_catch);
    s->old_level = agseterr(AGERR);
    s->hooked = true;
    s->g = build(in, level, err);
    if (!s->g) return -1;
    if (png) agattr(s->g, AGRAPH, S("size"), S("340,340"));
    if (!layout) return 0;
    s->gvc = context();
    if (!s->gvc) return mp_fail(err, "lifetime graph: cannot start Graphviz");
    if (gvLayout(s->gvc, s->g, "dot"))
        return mp_fail(err, "lifetime graph: the dot layout failed%s%s", gv_msg[0] ? ": " : "", gv_msg);
    s->laid_out = true;
    return 0;
}

static void session_close(session *s)
{
    if (s->laid_out) gvFreeLayout(s->gvc, s->g);
    if (s->g) agclose(s->g);
    if (s->hooked) {
        agseterrf(s->old_f);
        agseterr(s->old_level);
    }
}

int mp_viz_write_graph(const mp_viz_input *in, mp_viz_level level, mp_viz_format fmt, const char *path, mp_err *err)
{
    static const char *const formats[] = {[MP_VIZ_DOT] = "dot", [MP_VIZ_SVG] = "svg", [MP_VIZ_PNG] = "png"};
    if (fmt < MP_VIZ_DOT || fmt > MP_VIZ_PNG) return mp_fail(err, "lifetime graph: unknown format %d", (int)fmt);
    session s;
    char *tmp = NULL;
    int rc = -1;
    if (session_open(&s, in, level, fmt != MP_VIZ_DOT, fmt == MP_VIZ_PNG, err)) goto done;
    FILE *f = mp_viz_open_tmp(path, &tmp, err);
    if (!f) goto done;
    bool bad = false;
    if (fmt == MP_VIZ_DOT) {
        bad = agwrite(s.g, f) != 0;
    } else {
        /* gvRenderFilename opens the file by name: render into the temporary one */
        fclose(f);
        f = NULL;
        if (gvRenderFilename(s.gvc, s.g, formats[fmt], tmp)) {
            mp_fail(err, "lifetime graph: cannot render %s%s%s", formats[fmt], gv_msg[0] ? ": " : "", gv_msg);
            bad = true;
        }
    }
    if (bad && fmt == MP_VIZ_DOT) mp_fail(err, "cannot write %s", path);
    rc = mp_viz_commit(f, &tmp, path, bad, err);
done:
    session_close(&s);
    return rc;
}

int mp_viz_graph_svg(const mp_viz_input *in, mp_viz_level level, char **svg, size_t *len, mp_err *err)
{
    session s;
    int rc = -1;
    *svg = NULL;
    *len = 0;
    if (session_open(&s, in, level, true, false, err)) goto done;
    char *data = NULL;
    unsigned int n = 0;
    if (gvRenderData(s.gvc, s.g, "svg", &data, &n) || !data) {
        mp_fail(err, "lifetime graph: cannot render svg%s%s", gv_msg[0] ? ": " : "", gv_msg);
        goto done;
    }
    /* drop the XML prolog and DOCTYPE: the element is embedded in HTML */
    size_t off = 0;
    while (off + 4 <= n && memcmp(data + off, "<svg", 4)) off++;
    if (off + 4 > n) off = 0;
    *svg = malloc(n - off + 1);
    if (*svg) {
        memcpy(*svg, data + off, n - off);
        (*svg)[n - off] = 0;
        *len = n - off;
        rc = 0;
    } else {
        mp_fail(err, "out of memory");
    }
    gvFreeRenderData(data);
done:
    session_close(&s);
    return rc;
}
