/* viz_report.c - one self-contained HTML page: the summary and breakdown
 * tables, the timeline and the lifetime graph (inline SVG), the per-tensor
 * decision table (sortable by a small inline script) and the baselines. */
#include <stdlib.h>
#include <string.h>

#include "codegen/viz.h"

static const char *const phase_names[MP_PHASE_COUNT] = {"forward", "loss", "backward", "optimizer"};

static const char style[] =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}\n"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}\n"
    "table{border-collapse:collapse;font-size:13px}\n"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\n"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "th{background:#f0f0f0}\n"
    "table.sortable th{cursor:pointer;user-select:none}\n"
    "th[data-dir=asc]::after{content:' \\25b2'}th[data-dir=desc]::after{content:' \\25bc'}\n"
    ".scroll{overflow:auto;max-height:900px;border:1px solid #ccc}\n"
    "#graph svg{display:block}\n"
    ".d-recomputed{color:#e8710a;font-weight:bold}.d-not-droppable{color:#1f77b4}\n"
    ".peak{color:#d62728;font-weight:bold}\n"
    "p.note{color:#555;font-size:13px}\n";

/* Records script errors where a headless browser's DOM dump shows them. */
static const char error_script[] =
    "<script>(function(){var st=document.getElementById('viz-status');"
    "window.onerror=function(msg,src,line){"
    "st.setAttribute('data-errors',String(Number(st.getAttribute('data-errors'))+1));"
    "st.textContent+=msg+' (line '+line+')\\n';};})();</script>\n";

/* Sorting by a header click: numbers by data-v, text by content; the
 * decision table starts sorted by size. Marks the page ready at the end. */
static const char page_script[] =
    "<script>(function(){\n"
    "function key(td,num){return num?Number(td.getAttribute('data-v')):td.textContent;}\n"
    "function sortBy(table,col,dir){\n"
    "  var head=table.tHead.rows[0].cells,num=head[col].classList.contains('n');\n"
    "  var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);\n"
    "  rows.sort(function(a,b){var x=key(a.cells[col],num),y=key(b.cells[col],num);"
    "return (x<y?-1:x>y?1:0)*dir;});\n"
    "  var frag=document.createDocumentFragment();\n"
    "  for(var i=0;i<rows.length;i++)frag.appendChild(rows[i]);\n"
    "  body.appendChild(frag);\n"
    "  for(var j=0;j<head.length;j++)head[j].removeAttribute('data-dir');\n"
    "  head[col].setAttribute('data-dir',dir>0?'asc':'desc');\n"
    "}\n"
    "var tables=document.querySelectorAll('table.sortable');\n"
    "for(var t=0;t<tables.length;t++)(function(table){\n"
    "  var head=table.tHead.rows[0].cells;\n"
    "  for(var c=0;c<head.length;c++)(function(col){head[col].addEventListener('click',function(){\n"
    "    var d=head[col].getAttribute('data-dir');\n"
    "    sortBy(table,col,d==='desc'?1:d==='asc'?-1:(head[col].classList.contains('n')?-1:1));});})(c);\n"
    "})(tables[t]);\n"
    "var dt=document.getElementById('decisions');\n"
    "if(dt&&dt.tBodies[0].rows.length)sortBy(dt,2,-1);\n"
    "document.getElementById('viz-status').setAttribute('data-ready','yes');\n"
    "})();</script>\n";

static void text(FILE *f, const char *s) { mp_viz_xml_text(f, s); }

static void row_text(FILE *f, const char *key, const char *val)
{
    fprintf(f, "<tr><th>%s</th><td>", key);
    text(f, val);
    fputs("</td></tr>\n", f);
}

static void row_size(FILE *f, const char *key, int64_t b, const char *extra)
{
    char sz[32];
    fprintf(f, "<tr><th>%s</th><td>%s (%lld bytes)%s</td></tr>\n", key, mp_viz_size_str(b, sz), (long long)b,
            extra ? extra : "");
}

static void summary(FILE *f, const mp_viz_input *in, const int64_t *viz_live)
{
    const mp_graph *g = in->g;
    const mp_memory *m = in->m;
    char buf[600], sz[32];
    fputs("<h2>Summary</h2>\n<table id=\"summary\">\n", f);
    if (in->title) row_text(f, "model", in->title);
    if (in->subtitle) row_text(f, "step", in->subtitle);
    int len = snprintf(buf, sizeof buf, "%d (", (int)g->nnodes);
    for (int p = 0, first = 1; p < MP_PHASE_COUNT; p++)
        if (m->phase_nodes[p] && len < (int)sizeof buf) {
            len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%s %d", first ? "" : ", ", phase_names[p],
                            (int)m->phase_nodes[p]);
            first = 0;
        }
    if (len < (int)sizeof buf) snprintf(buf + len, sizeof buf - (size_t)len, ")");
    row_text(f, "nodes", buf);
    fprintf(f, "<tr><th>peak</th><td class=\"peak\" id=\"summary-peak\" data-v=\"%lld\">%s", (long long)m->peak_bytes,
            mp_viz_size_str(m->peak_bytes, sz));
    if (m->peak_node >= 0) {
        fprintf(f, " at step %d of %d: ", (int)m->peak_step, (int)m->nsteps);
        text(f, g->nodes[m->peak_node].name);
        fprintf(f, " (%s)", phase_names[g->nodes[m->peak_node].phase % MP_PHASE_COUNT]);
    }
    fputs("</td></tr>\n", f);
    row_size(f, "saved activations", m->saved_activation_bytes, NULL);
    if (in->budget_bytes > 0) {
        const char *fits = m->peak_bytes <= in->budget_bytes ? " — the peak fits" : " — the peak is over budget";
        row_size(f, "budget", in->budget_bytes, fits);
    }
    if (in->store_all_peak > 0) {
        snprintf(buf, sizeof buf, " — this schedule's peak is %.1f%% of it",
                 100.0 * (double)m->peak_bytes / (double)in->store_all_peak);
        row_size(f, "store-everything peak", in->store_all_peak, buf);
    }
    int32_t nre = 0, ndec[MP_VIZ_DECISION_COUNT] = {0};
    for (int32_t i = 0; i < g->nnodes; i++) nre += mp_viz_node_recomputes(in, i);
    for (int32_t v = 0; v < g->nvalues; v++)
        if (m->lt.owner[v] == v && m->lt.start[v] >= 0) ndec[mp_viz_decision_of(in, v)]++;
    snprintf(buf, sizeof buf, "%d", (int)nre);
    row_text(f, "recompute steps", buf);
    snprintf(buf, sizeof buf, "%d kept, %d recomputed, %d not droppable", (int)ndec[MP_VIZ_KEPT],
             (int)ndec[MP_VIZ_RECOMPUTED], (int)ndec[MP_VIZ_PINNED]);
    row_text(f, "tensors", buf);
    if (m->peak_step >= 0 && viz_live) {
        int64_t r = viz_live[(size_t)m->peak_step * MP_VIZ_CAT_COUNT + MP_VIZ_CAT_RECOMPUTED];
        if (r) row_size(f, "recomputed at the peak", r, NULL);
    }
    fputs("</table>\n", f);
}

static void breakdown(FILE *f, const mp_memory *m)
{
    char a[32], b[32];
    fputs("<h2>Memory by category</h2>\n<table id=\"breakdown\">\n<thead><tr><th>category</th>"
          "<th class=\"n\">at the peak</th><th class=\"n\">total</th></tr></thead>\n<tbody>\n", f);
    int64_t sp = 0, st = 0;
    for (int c = 0; c < MP_MEM_COUNT; c++) {
        fprintf(f, "<tr><td>%s</td><td class=\"n\" data-v=\"%lld\">%s</td><td class=\"n\" data-v=\"%lld\">%s</td></tr>\n",
                mp_mem_cat_names[c], (long long)m->at_peak[c], mp_viz_size_str(m->at_peak[c], a),
                (long long)m->totals[c], mp_viz_size_str(m->totals[c], b));
        sp += m->at_peak[c];
        st += m->totals[c];
    }
    fprintf(f, "<tr><th>total</th><th class=\"n\">%s</th><th class=\"n\">%s</th></tr>\n</tbody></table>\n",
            mp_viz_size_str(sp, a), mp_viz_size_str(st, b));
}

static void baselines(FILE *f, const mp_viz_input *in)
{
    if (in->nbaselines <= 0 || !in->baselines) return;
    char sz[32];
    fputs("<h2>Baselines</h2>\n<table id=\"baselines\" class=\"sortable\">\n<thead><tr><th>schedule</th>"
          "<th class=\"n\">peak</th><th class=\"n\">recompute cost (s)</th>", f);
    if (in->budget_bytes > 0) fputs("<th>within the budget</th>", f);
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int i = 0; i < in->nbaselines; i++) {
        const mp_viz_baseline *b = &in->baselines[i];
        fputs("<tr><td>", f);
        text(f, b->name ? b->name : "?");
        fprintf(f, "</td><td class=\"n\" data-v=\"%lld\">%s</td>", (long long)b->peak_bytes,
                mp_viz_size_str(b->peak_bytes, sz));
        if (b->recompute_cost >= 0) fprintf(f, "<td class=\"n\" data-v=\"%.9g\">%.6g</td>", b->recompute_cost, b->recompute_cost);
        else fputs("<td class=\"n\" data-v=\"-1\">?</td>", f);
        if (in->budget_bytes > 0) fprintf(f, "<td>%s</td>", b->peak_bytes <= in->budget_bytes ? "yes" : "no");
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void decisions(FILE *f, const mp_viz_input *in)
{
    const mp_graph *g = in->g;
    const mp_lifetimes *lt = &in->m->lt;
    int32_t n = 0;
    for (int32_t v = 0; v < g->nvalues; v++) n += lt->owner[v] == v && lt->start[v] >= 0;
    fprintf(f, "<h2>Tensors</h2>\n<p class=\"note\">%d buffers that hold memory (an in-place update shares its "
            "base's). Live interval: first and last step, inclusive. Click a header to sort.</p>\n", (int)n);
    fputs("<div class=\"scroll\"><table id=\"decisions\" class=\"sortable\">\n<thead><tr><th>tensor</th>"
          "<th>category</th><th class=\"n\">bytes</th><th class=\"n\">first step</th><th class=\"n\">last step</th>"
          "<th>at the peak</th><th>decision</th><th>producer</th></tr></thead>\n<tbody>\n", f);
    char sz[32];
    int32_t p = in->m->peak_step;
    for (int32_t v = 0; v < g->nvalues; v++) {
        if (lt->owner[v] != v || lt->start[v] < 0) continue;
        const mp_value *x = &g->values[v];
        mp_viz_decision d = mp_viz_decision_of(in, v);
        bool at_peak = p >= 0 && lt->start[v] <= p && p <= lt->end[v];
        fputs("<tr><td>", f);
        text(f, x->name ? x->name : "");
        fprintf(f, "</td><td>%s</td><td class=\"n\" data-v=\"%lld\">%s</td><td class=\"n\" data-v=\"%d\">%d</td>"
                "<td class=\"n\" data-v=\"%d\">%d</td><td%s>%s</td><td class=\"d-%s\">%s</td><td>",
                mp_mem_cat_names[in->m->cat[v] % MP_MEM_COUNT], (long long)lt->bytes[v], mp_viz_size_str(lt->bytes[v], sz),
                (int)lt->start[v], (int)lt->start[v], (int)lt->end[v], (int)lt->end[v], at_peak ? " class=\"peak\"" : "",
                at_peak ? "yes" : "no", d == MP_VIZ_PINNED ? "not-droppable" : mp_viz_decision_names[d],
                mp_viz_decision_names[d]);
        if (x->producer >= 0 && x->producer < g->nnodes) text(f, g->nodes[x->producer].name);
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

int mp_viz_write_report(const mp_viz_input *in, mp_viz_level level, const char *path, mp_err *err)
{
    if (!in || !in->g || !in->m) return mp_fail(err, "report: no memory analysis given");
    if (level == MP_VIZ_LEVEL_AUTO)
        level = in->g->nnodes <= MP_VIZ_OP_MAX_NODES      ? MP_VIZ_LEVEL_OP
                : in->g->nnodes <= MP_VIZ_REPORT_MAX_NODES ? MP_VIZ_LEVEL_LAYER
                                                          : MP_VIZ_LEVEL_STAGE;
    /* the slow parts first: nothing is created when they fail */
    char *graph = NULL;
    size_t glen = 0;
    int64_t *live = NULL;
    if (mp_viz_graph_svg(in, level, &graph, &glen, err) || mp_viz_profile(in, &live, err)) {
        free(graph);
        return -1;
    }
    char *tmp;
    FILE *f = mp_viz_open_tmp(path, &tmp, err);
    if (!f) {
        free(graph);
        free(live);
        return -1;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>memplan", f);
    if (in->title) {
        fputs(": ", f);
        text(f, in->title);
    }
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", style);
    fputs("<div id=\"viz-status\" hidden data-errors=\"0\" data-ready=\"no\"></div>\n", f);
    fputs(error_script, f);
    fputs("<h1>memplan memory report", f);
    if (in->title) {
        fputs(": ", f);
        text(f, in->title);
    }
    fputs("</h1>\n", f);
    summary(f, in, live);
    breakdown(f, in->m);
    fputs("<h2>Timeline</h2>\n<p class=\"note\">Live bytes at each step, stacked by category; each pixel column "
          "shows the largest step it covers. Hover for the step's node.</p>\n<div id=\"timeline\" class=\"scroll\">\n", f);
    bool bad = mp_viz_timeline_svg(in, f, err) != 0;
    fprintf(f, "</div>\n<h2>Lifetime graph</h2>\n<p class=\"note\">%s level: ", mp_viz_level_names[level]);
    fputs(level == MP_VIZ_LEVEL_OP      ? "one box per op, one edge per tensor and reader (size, live interval)."
          : level == MP_VIZ_LEVEL_LAYER ? "ops grouped by ONNX name scope."
                                        : "one box per name scope; edges sum the bytes that cross between scopes.",
          f);
    fputs(" Red: the peak step and the tensors live at it; orange: recomputation.</p>\n<div id=\"graph\" class=\"scroll\">\n", f);
    fwrite(graph, 1, glen, f);
    fputs("</div>\n", f);
    baselines(f, in);
    decisions(f, in);
    fputs(page_script, f);
    fputs("</body>\n</html>\n", f);
    free(graph);
    free(live);
    return mp_viz_commit(f, &tmp, path, bad, err);
}
