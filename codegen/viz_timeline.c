/* viz_timeline.c - the memory timeline as hand-written SVG: live bytes per
 * category stacked over the schedule, and the helpers every viz_*.c file uses
 * (decisions, the per-category profile, files written by rename). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/viz.h"

const char *const mp_viz_decision_names[MP_VIZ_DECISION_COUNT] = {"kept", "recomputed", "not droppable"};

const char *const mp_viz_cat_names[MP_VIZ_CAT_COUNT] = {
    [MP_VIZ_CAT_PARAMS] = "parameters",           [MP_VIZ_CAT_GRADS] = "gradients",
    [MP_VIZ_CAT_OPT_STATE] = "optimizer_state",   [MP_VIZ_CAT_ACTIVATIONS] = "activations",
    [MP_VIZ_CAT_RECOMPUTED] = "recomputed",       [MP_VIZ_CAT_TRANSIENT] = "transient",
    [MP_VIZ_CAT_INPUTS] = "inputs",
};

const char *const mp_viz_cat_colors[MP_VIZ_CAT_COUNT] = {
    [MP_VIZ_CAT_PARAMS] = "#4e79a7",     [MP_VIZ_CAT_GRADS] = "#59a14f",
    [MP_VIZ_CAT_OPT_STATE] = "#b07aa1",  [MP_VIZ_CAT_ACTIVATIONS] = "#76b7b2",
    [MP_VIZ_CAT_RECOMPUTED] = "#f28e2b", [MP_VIZ_CAT_TRANSIENT] = "#bab0ac",
    [MP_VIZ_CAT_INPUTS] = "#edc948",
};

/* memory.h categories to timeline bands */
static const mp_viz_cat cat_of_mem[MP_MEM_COUNT] = {
    [MP_MEM_PARAMS] = MP_VIZ_CAT_PARAMS,        [MP_MEM_BUFFERS] = MP_VIZ_CAT_PARAMS,
    [MP_MEM_CONSTANTS] = MP_VIZ_CAT_PARAMS,     [MP_MEM_GRADS] = MP_VIZ_CAT_GRADS,
    [MP_MEM_OPT_STATE] = MP_VIZ_CAT_OPT_STATE,  [MP_MEM_ACTIVATIONS] = MP_VIZ_CAT_ACTIVATIONS,
    [MP_MEM_TRANSIENT] = MP_VIZ_CAT_TRANSIENT,  [MP_MEM_INPUTS] = MP_VIZ_CAT_INPUTS,
};

static const char *const phase_names[MP_PHASE_COUNT] = {"forward", "loss", "backward", "optimizer"};

/* ---- shared helpers ---------------------------------------------------------- */

mp_viz_input mp_viz_input_of(const mp_graph *g, const mp_memory *m) { return (mp_viz_input){.g = g, .m = m}; }

mp_viz_decision mp_viz_decision_of(const mp_viz_input *in, int32_t v)
{
    if (in->g->values[v].flags & MP_VAL_RECOMPUTED) return MP_VIZ_RECOMPUTED;
    if (in->decision && in->decision[v] < MP_VIZ_DECISION_COUNT) return (mp_viz_decision)in->decision[v];
    return MP_VIZ_KEPT;
}

bool mp_viz_node_recomputes(const mp_viz_input *in, int32_t node)
{
    int32_t step = in->m->lt.step_of[node];
    if (in->step_recompute && step >= 0 && step < in->m->nsteps && in->step_recompute[step]) return true;
    const mp_node *nd = &in->g->nodes[node];
    for (int32_t k = 0; k < nd->nout; k++)
        if (nd->out[k] >= 0 && (in->g->values[nd->out[k]].flags & MP_VAL_RECOMPUTED)) return true;
    return false;
}

mp_viz_cat mp_viz_category(const mp_viz_input *in, int32_t v)
{
    if (in->g->values[v].flags & MP_VAL_RECOMPUTED) return MP_VIZ_CAT_RECOMPUTED;
    uint8_t c = in->m->cat[v];
    return c < MP_MEM_COUNT ? cat_of_mem[c] : MP_VIZ_CAT_TRANSIENT;
}

int mp_viz_profile(const mp_viz_input *in, int64_t **out, mp_err *err)
{
    const mp_memory *m = in->m;
    const mp_lifetimes *lt = &m->lt;
    int32_t n = m->nsteps;
    /* one extra row: each buffer's delta closes at end + 1 */
    int64_t *live = calloc(((size_t)n + 1) * MP_VIZ_CAT_COUNT, sizeof *live);
    if (!live) return mp_fail(err, "out of memory");
    for (int32_t v = 0; v < in->g->nvalues; v++) {
        if (lt->owner[v] != v || lt->start[v] < 0 || lt->bytes[v] <= 0) continue;
        int32_t s = lt->start[v], e = lt->end[v];
        if (s >= n || e < s) continue;
        if (e >= n) e = n - 1;
        int c = mp_viz_category(in, v);
        live[(size_t)s * MP_VIZ_CAT_COUNT + c] += lt->bytes[v];
        live[((size_t)e + 1) * MP_VIZ_CAT_COUNT + c] -= lt->bytes[v];
    }
    for (int32_t i = 1; i < n; i++)
        for (int c = 0; c < MP_VIZ_CAT_COUNT; c++)
            live[(size_t)i * MP_VIZ_CAT_COUNT + c] += live[((size_t)i - 1) * MP_VIZ_CAT_COUNT + c];
    *out = live;
    return 0;
}

FILE *mp_viz_open_tmp(const char *path, char **tmp, mp_err *err)
{
    size_t n = strlen(path);
    *tmp = malloc(n + 16);
    if (!*tmp) {
        mp_fail(err, "out of memory");
        return NULL;
    }
    snprintf(*tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(*tmp);
    /* mkstemp makes it 0600: give the file the mode a plain fopen would */
    mode_t mask = umask(0);
    umask(mask);
    if (fd >= 0) fchmod(fd, 0666 & ~mask);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        mp_fail(err, "cannot create %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(*tmp);
        }
        free(*tmp);
        *tmp = NULL;
    }
    return f;
}

int mp_viz_commit(FILE *f, char **tmp, const char *path, bool bad, mp_err *err)
{
    int saved = 0;
    if (f) {
        if (ferror(f)) bad = true, saved = errno;
        if (fclose(f)) bad = true, saved = errno;
    }
    int rc = 0;
    if (bad || rename(*tmp, path)) {
        /* a caller that failed first has its own message */
        if (!bad || saved) mp_fail(err, "cannot write %s: %s", path, strerror(saved ? saved : errno));
        unlink(*tmp);
        rc = -1;
    }
    free(*tmp);
    *tmp = NULL;
    return rc;
}

void mp_viz_xml_text(FILE *f, const char *s)
{
    for (; s && *s; s++) switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

const char *mp_viz_size_str(int64_t b, char buf[32])
{
    if (b >= 1024 * 1024) snprintf(buf, 32, "%.2f MiB", b / (1024.0 * 1024.0));
    else if (b >= 1024) snprintf(buf, 32, "%.1f KiB", b / 1024.0);
    else snprintf(buf, 32, "%lld B", (long long)b);
    return buf;
}

/* ---- the picture ------------------------------------------------------------- */

/* Canvas and plot area (pixels). */
enum { W = 1100, H = 470, X0 = 80, X1 = W - 30, Y0 = 56, Y1 = 370 };
#define PW (X1 - X0)
#define PH (Y1 - Y0)

static double mib(int64_t b) { return b / (1024.0 * 1024.0); }

/* 1, 2 or 5 times a power of ten, at least x. */
static double nice_step(double x)
{
    if (x <= 0) return 1;
    double p = pow(10, floor(log10(x)));
    double f = x / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

typedef struct timeline {
    const mp_viz_input *in;
    int32_t n, ncols;
    int64_t *live;           /* n rows of MP_VIZ_CAT_COUNT */
    int32_t *rep;            /* ncols: the step each column shows (the largest it covers) */
    int32_t *order;          /* n: node of each step */
    double ymax;             /* MiB at the top of the axis */
} timeline;

static int64_t row_total(const timeline *t, int32_t i)
{
    int64_t s = 0;
    for (int c = 0; c < MP_VIZ_CAT_COUNT; c++) s += t->live[(size_t)i * MP_VIZ_CAT_COUNT + c];
    return s;
}

static int32_t col_first(const timeline *t, int32_t c) { return (int32_t)((int64_t)c * t->n / t->ncols); }
static double col_x(const timeline *t, int32_t c) { return X0 + (double)c * PW / t->ncols; }
static double step_x(const timeline *t, int32_t s) { return X0 + (double)s * PW / (t->n ? t->n : 1); }
static double bytes_y(const timeline *t, int64_t b) { return Y1 - mib(b) / t->ymax * PH; }

/* The stacked band of category k: its top edge left to right, its base right
 * to left, one flat segment per column (V only where the height changes). */
static void band_path(FILE *f, const timeline *t, int k)
{
    int64_t *base = malloc(sizeof(int64_t) * (size_t)t->ncols * 2);
    if (!base) return;
    int64_t *top = base + t->ncols;
    for (int32_t c = 0; c < t->ncols; c++) {
        const int64_t *row = t->live + (size_t)t->rep[c] * MP_VIZ_CAT_COUNT;
        base[c] = 0;
        for (int j = 0; j < k; j++) base[c] += row[j];
        top[c] = base[c] + row[k];
    }
    fprintf(f, "<path class=\"tl-cat\" id=\"tl-cat-%s\" fill=\"%s\" d=\"M%.1f,%.1f", mp_viz_cat_names[k],
            mp_viz_cat_colors[k], col_x(t, 0), bytes_y(t, top[0]));
    for (int32_t c = 0; c < t->ncols; c++) {
        fprintf(f, "H%.1f", col_x(t, c + 1));
        if (c + 1 < t->ncols && top[c + 1] != top[c]) fprintf(f, "V%.1f", bytes_y(t, top[c + 1]));
    }
    fprintf(f, "V%.1f", bytes_y(t, base[t->ncols - 1]));
    for (int32_t c = t->ncols - 1; c >= 0; c--) {
        fprintf(f, "H%.1f", col_x(t, c));
        if (c > 0 && base[c - 1] != base[c]) fprintf(f, "V%.1f", bytes_y(t, base[c - 1]));
    }
    fprintf(f, "Z\"><title>%s</title></path>\n", mp_viz_cat_names[k]);
    free(base);
}

static void axes(FILE *f, const timeline *t)
{
    fprintf(f, "<g id=\"tl-axes\" stroke=\"#333\" fill=\"none\"><path d=\"M%d,%dV%dH%d\"/></g>\n", X0, Y0, Y1, X1);
    /* y: MiB */
    double ys = nice_step(t->ymax / 6);
    fprintf(f, "<g id=\"tl-yticks\" fill=\"#333\" text-anchor=\"end\">\n");
    for (double v = 0; v <= t->ymax + 1e-9; v += ys) {
        double y = Y1 - v / t->ymax * PH;
        fprintf(f, "<path d=\"M%d,%.1fH%d\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\">%g</text>\n", X0, y, X1,
                X0 - 6, y + 4, v);
    }
    fprintf(f, "</g>\n<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\" "
            "fill=\"#333\">live memory (MiB)</text>\n", (Y0 + Y1) / 2, (Y0 + Y1) / 2);
    /* x: steps */
    double xs = nice_step(t->n / 10.0);
    if (xs < 1) xs = 1;
    fprintf(f, "<g id=\"tl-xticks\" fill=\"#333\" text-anchor=\"middle\">\n");
    for (double s = 0; s <= t->n; s += xs)
        fprintf(f, "<path d=\"M%.1f,%dv5\" stroke=\"#333\"/><text x=\"%.1f\" y=\"%d\">%g</text>\n",
                step_x(t, (int32_t)s), Y1, step_x(t, (int32_t)s), Y1 + 18, s);
    fprintf(f, "</g>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#333\">schedule step</text>\n",
            (X0 + X1) / 2, Y1 + 36);
}

/* A vertical line where each phase starts (the running maximum of the phase,
 * so recompute nodes of the forward inside the backward draw none). */
static void phases(FILE *f, const timeline *t)
{
    fprintf(f, "<g id=\"tl-phases\" font-size=\"11\" fill=\"#555\">\n");
    int cur = -1;
    double last_x = -1e9;
    bool raised = false;
    for (int32_t i = 0; i < t->n; i++) {
        int p = t->in->g->nodes[t->order[i]].phase;
        if (p <= cur || p >= MP_PHASE_COUNT) continue;
        cur = p;
        double x = step_x(t, i);
        /* a short phase (the loss) would print over its neighbour: raise every other close label */
        raised = x - last_x < 70 && !raised;
        last_x = x;
        if (i > 0)
            fprintf(f, "<path d=\"M%.1f,%dV%d\" stroke=\"#555\" stroke-dasharray=\"2 3\"/>\n", x, Y0 - 26, Y1);
        fprintf(f, "<text id=\"tl-phase-%s\" x=\"%.1f\" y=\"%d\">%s</text>\n", phase_names[p], x + 3,
                raised ? Y0 - 16 : Y0 - 4, phase_names[p]);
    }
    fprintf(f, "</g>\n");
}

/* Orange marks under the axis over the columns that run recomputations. */
static void recompute_marks(FILE *f, const timeline *t)
{
    fprintf(f, "<g id=\"tl-recompute\" fill=\"%s\">\n", mp_viz_cat_colors[MP_VIZ_CAT_RECOMPUTED]);
    int32_t run = -1;
    for (int32_t c = 0; c <= t->ncols; c++) {
        bool on = false;
        if (c < t->ncols)
            for (int32_t s = col_first(t, c); s < col_first(t, c + 1) && !on; s++) on = mp_viz_node_recomputes(t->in, t->order[s]);
        if (on && run < 0) run = c;
        if (!on && run >= 0) {
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"5\"><title>recompute</title></rect>\n",
                    col_x(t, run), Y1 + 1, col_x(t, c) - col_x(t, run));
            run = -1;
        }
    }
    fprintf(f, "</g>\n");
}

static void hline(FILE *f, const timeline *t, const char *id, int64_t bytes, const char *color, const char *dash,
                  const char *what)
{
    double y = bytes_y(t, bytes);
    char sz[32];
    fprintf(f, "<g id=\"%s\"><line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s%s%s/>",
            id, X0, y, X1, y, color, dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">%s %s</text></g>\n", X1 - 4, y - 4, color,
            what, mp_viz_size_str(bytes, sz));
}

/* Invisible columns with a tooltip: step, node, total. */
static void hover(FILE *f, const timeline *t)
{
    fprintf(f, "<g id=\"tl-hover\" fill=\"#000\" fill-opacity=\"0\">\n");
    for (int32_t c = 0; c < t->ncols; c++) {
        int32_t s = t->rep[c];
        char sz[32];
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"%d\"><title>step %d: ", col_x(t, c), Y0,
                col_x(t, c + 1) - col_x(t, c), PH, (int)s);
        mp_viz_xml_text(f, t->in->g->nodes[t->order[s]].name);
        fprintf(f, " — %s</title></rect>\n", mp_viz_size_str(row_total(t, s), sz));
    }
    fprintf(f, "</g>\n");
}

static void legend(FILE *f, const timeline *t)
{
    fprintf(f, "<g id=\"tl-legend\" fill=\"#333\">\n");
    int x = X0;
    for (int k = 0; k < MP_VIZ_CAT_COUNT; k++) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                x, H - 40, mp_viz_cat_colors[k], x + 16, H - 30, mp_viz_cat_names[k]);
        x += 24 + 7 * (int)strlen(mp_viz_cat_names[k]);
    }
    if (t->in->budget_bytes > 0) {
        fprintf(f, "<path d=\"M%d,%dh20\" stroke=\"#d62728\" stroke-width=\"2\"/><text x=\"%d\" y=\"%d\">budget</text>\n",
                x, H - 34, x + 24, H - 30);
        x += 80;
    }
    if (t->in->store_all_peak > 0)
        fprintf(f, "<path d=\"M%d,%dh20\" stroke=\"#555\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>"
                "<text x=\"%d\" y=\"%d\">store everything</text>\n", x, H - 34, x + 24, H - 30);
    fprintf(f, "</g>\n");
}

int mp_viz_timeline_svg(const mp_viz_input *in, FILE *f, mp_err *err)
{
    timeline t = {.in = in, .n = in->m->nsteps};
    if (mp_viz_profile(in, &t.live, err)) return -1;
    t.ncols = t.n < PW ? t.n : PW;
    t.rep = malloc(sizeof *t.rep * ((size_t)t.ncols + 1));
    t.order = malloc(sizeof *t.order * ((size_t)t.n + 1));
    if (!t.rep || !t.order) {
        free(t.live);
        free(t.rep);
        free(t.order);
        return mp_fail(err, "out of memory");
    }
    for (int32_t i = 0; i < t.n; i++) t.order[i] = 0;
    for (int32_t v = 0; v < in->g->nnodes; v++)
        if (in->m->lt.step_of[v] >= 0 && in->m->lt.step_of[v] < t.n) t.order[in->m->lt.step_of[v]] = v;

    /* pass 1: each column shows the largest step it covers */
    int64_t top = 0;
    for (int32_t c = 0; c < t.ncols; c++) {
        int32_t best = col_first(&t, c);
        for (int32_t s = best + 1; s < col_first(&t, c + 1); s++)
            if (row_total(&t, s) > row_total(&t, best)) best = s;
        t.rep[c] = best;
        if (row_total(&t, best) > top) top = row_total(&t, best);
    }
    if (in->budget_bytes > top) top = in->budget_bytes;
    if (in->store_all_peak > top) top = in->store_all_peak;
    double ys = nice_step(mib(top) * 1.05 / 6);
    t.ymax = ceil(mib(top) * 1.05 / ys) * ys;
    if (t.ymax <= 0) t.ymax = 1;

    /* pass 2: draw */
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"timeline-svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n<text x=\"%d\" y=\"22\" font-size=\"15\" "
            "font-weight=\"bold\" fill=\"#222\">", W, H, X0);
    if (in->title) {
        mp_viz_xml_text(f, in->title);
        fputs(" — ", f);
    }
    fprintf(f, "live memory over %d steps</text>\n", (int)t.n);
    axes(f, &t);
    if (t.ncols > 0) {
        fprintf(f, "<g id=\"tl-bands\" stroke=\"none\">\n");
        for (int k = 0; k < MP_VIZ_CAT_COUNT; k++) band_path(f, &t, k);
        fprintf(f, "</g>\n");
        phases(f, &t);
        recompute_marks(f, &t);
        const mp_memory *m = in->m;
        if (m->peak_step >= 0 && m->peak_step < t.n) {
            char sz[32];
            double x = X0 + (m->peak_step + 0.5) * PW / t.n, y = bytes_y(&t, row_total(&t, m->peak_step));
            fprintf(f, "<g id=\"tl-peak\" fill=\"#d62728\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">peak %s at step %d</text></g>\n",
                    x, y, x + (x > X0 + PW * 0.7 ? -8 : 8), y - 6 < Y0 + 10 ? Y0 + 10 : y - 6,
                    x > X0 + PW * 0.7 ? "end" : "start", mp_viz_size_str(row_total(&t, m->peak_step), sz),
                    (int)m->peak_step);
        }
        hover(f, &t);
    }
    if (in->store_all_peak > 0)
        hline(f, &t, "tl-store-all", in->store_all_peak, "#555", "6 4", "store everything");
    if (in->budget_bytes > 0) hline(f, &t, "tl-budget", in->budget_bytes, "#d62728", NULL, "budget");
    legend(f, &t);
    fprintf(f, "</svg>\n");
    free(t.live);
    free(t.rep);
    free(t.order);
    return 0;
}

int mp_viz_write_timeline(const mp_viz_input *in, const char *path, mp_err *err)
{
    char *tmp;
    FILE *f = mp_viz_open_tmp(path, &tmp, err);
    if (!f) return -1;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    bool bad = mp_viz_timeline_svg(in, f, err) != 0;
    return mp_viz_commit(f, &tmp, path, bad, err);
}
