/* graph_json.c - rematerialization graphs from networkx node-link JSON files
 * (../shared/remat-graphs): Checkmate's training graphs and Moccasin's random
 * layered graphs, read in four passes: nodes, links, a topological order,
 * the rgraph. One value per node, its output (Checkmate's model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/json_read.h"
#include "passes/remat.h"

#define MAX_GRAPH_NODES (INT32_C(1) << 24)

/* The two dialects: which node fields give the id, the output bytes, the cost, resident bytes and the backward flag. */
typedef struct dialect {
    const char *id, *bytes, *cost, *param, *backward;
    const char *src, *dst; /* link endpoints */
} dialect;

static const dialect checkmate = {"id", "cost_ram", "cost_cpu", NULL, "backward", "source", "target"};
static const dialect moccasin = {"name", "out_cost", "duration", "param_cost", NULL, "0", "1"};

typedef struct jnode {
    char key[32];          /* the id as text: an integer's decimal digits, or the string (bounded) */
    int64_t num;           /* the id when it is an integer */
    bool numeric;
    int64_t bytes, param;
    double cost;
    bool backward;
} jnode;

typedef struct loader {
    const char *path;
    const mp_jdoc *d;
    const dialect *dl;
    int32_t n;
    jnode *nodes;
    int32_t *by_key;       /* n: node indices sorted by key, for link lookup */
    int32_t nlinks;
    int32_t *lsrc, *ldst;  /* node indices (file positions) */
    mp_err *err;
} loader;

static int fail_node(loader *L, int32_t i, const char *fmt, const char *field)
{
    char what[64];
    snprintf(what, sizeof what, fmt, field);
    return mp_fail(L->err, "%s: node %d of the file: %s", L->path, (int)i + 1, what);
}

/* A numeric field: present, a finite number >= 0; bytes must also be whole (*exact: their exact value). */
static int num_field(loader *L, int32_t i, int32_t obj, const char *field, int64_t *exact, double *out)
{
    int32_t v = mp_jdoc_member(L->d, obj, field);
    if (v < 0) return fail_node(L, i, "missing field '%s'", field);
    const mp_jnode *x = &L->d->node[v];
    if (x->type != MP_JNUM) return fail_node(L, i, "'%s' is not a number", field);
    if (!(x->num >= 0) || x->num > 9.2e18) return fail_node(L, i, "'%s' is negative or too large", field);
    if (exact && !x->is_int) return fail_node(L, i, "'%s' is not a whole number of bytes", field);
    if (exact) *exact = x->i;
    *out = x->num;
    return 0;
}

static int cmp_key(const jnode *a, const jnode *b)
{
    if (a->numeric && b->numeric) return a->num < b->num ? -1 : a->num > b->num;
    if (a->numeric != b->numeric) return a->numeric ? -1 : 1; /* integers before strings */
    return strcmp(a->key, b->key);
}

static const jnode *sort_nodes; /* qsort has no context argument */
static int cmp_index(const void *a, const void *b)
{
    return cmp_key(&sort_nodes[*(const int32_t *)a], &sort_nodes[*(const int32_t *)b]);
}

/* Fills k from an id value (an integer, or a string up to 31 bytes). */
static int id_key(const mp_jdoc *d, int32_t v, jnode *k)
{
    const mp_jnode *x = &d->node[v];
    if (x->type == MP_JNUM && x->is_int) {
        k->numeric = true;
        k->num = x->i;
        snprintf(k->key, sizeof k->key, "%lld", (long long)x->i);
        return 0;
    }
    if (x->type == MP_JSTR && x->len > 0 && x->len < (int32_t)sizeof k->key) {
        k->numeric = false;
        memcpy(k->key, x->str, (size_t)x->len + 1);
        return 0;
    }
    return -1;
}

/* pass 1: the nodes' fields */
static int read_nodes(loader *L, int32_t arr)
{
    const mp_jdoc *d = L->d;
    L->n = d->node[arr].count;
    if (L->n > MAX_GRAPH_NODES) return mp_fail(L->err, "%s: more than %d nodes", L->path, (int)MAX_GRAPH_NODES);
    L->nodes = calloc((size_t)L->n + 1, sizeof *L->nodes);
    L->by_key = malloc(((size_t)L->n + 1) * sizeof *L->by_key);
    if (!L->nodes || !L->by_key) return mp_fail(L->err, "out of memory");
    int32_t i = 0;
    for (int32_t e = mp_jdoc_first(d, arr); e >= 0; e = mp_jdoc_next(d, arr, e), i++) {
        jnode *x = &L->nodes[i];
        if (d->node[e].type != MP_JOBJ) return mp_fail(L->err, "%s: node %d is not an object", L->path, (int)i + 1);
        if (i == 0) /* the dialect, from the first node: Checkmate has ids, Moccasin names */
            L->dl = mp_jdoc_member(d, e, "id") >= 0 ? &checkmate : &moccasin;
        int32_t id = mp_jdoc_member(d, e, L->dl->id);
        if (id < 0) return fail_node(L, i, "missing field '%s'", L->dl->id);
        if (id_key(d, id, x)) return fail_node(L, i, "'%s' is not an integer or a short string", L->dl->id);
        double unused;
        if (num_field(L, i, e, L->dl->bytes, &x->bytes, &unused) || num_field(L, i, e, L->dl->cost, NULL, &x->cost) ||
            (L->dl->param && num_field(L, i, e, L->dl->param, &x->param, &unused)))
            return -1;
        if (L->dl->backward) {
            int32_t b = mp_jdoc_member(d, e, L->dl->backward);
            if (b < 0) return fail_node(L, i, "missing field '%s'", L->dl->backward);
            if (d->node[b].type != MP_JBOOL) return fail_node(L, i, "'%s' is not true or false", L->dl->backward);
            x->backward = d->node[b].b;
        }
        L->by_key[i] = i;
    }
    sort_nodes = L->nodes;
    qsort(L->by_key, (size_t)L->n, sizeof *L->by_key, cmp_index);
    for (int32_t k = 1; k < L->n; k++)
        if (!cmp_key(&L->nodes[L->by_key[k - 1]], &L->nodes[L->by_key[k]]))
            return mp_fail(L->err, "%s: two nodes have the id %s", L->path, L->nodes[L->by_key[k]].key);
    return 0;
}

static int32_t find_node(const loader *L, const jnode *k)
{
    int32_t lo = 0, hi = L->n - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = cmp_key(&L->nodes[L->by_key[mid]], k);
        if (!c) return L->by_key[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* pass 2: links to node indices; a link to a missing node or a self-loop fails */
static int read_links(loader *L, int32_t arr)
{
    const mp_jdoc *d = L->d;
    L->nlinks = d->node[arr].count;
    L->lsrc = malloc(((size_t)L->nlinks + 1) * sizeof *L->lsrc);
    L->ldst = malloc(((size_t)L->nlinks + 1) * sizeof *L->ldst);
    if (!L->lsrc || !L->ldst) return mp_fail(L->err, "out of memory");
    int32_t i = 0;
    for (int32_t e = mp_jdoc_first(d, arr); e >= 0; e = mp_jdoc_next(d, arr, e), i++) {
        if (d->node[e].type != MP_JOBJ) return mp_fail(L->err, "%s: link %d is not an object", L->path, (int)i + 1);
        const char *ends[2] = {L->dl->src, L->dl->dst};
        int32_t *slot[2] = {&L->lsrc[i], &L->ldst[i]};
        for (int k = 0; k < 2; k++) {
            int32_t v = mp_jdoc_member(d, e, ends[k]);
            jnode key;
            if (v < 0) return mp_fail(L->err, "%s: link %d: missing field '%s'", L->path, (int)i + 1, ends[k]);
            if (id_key(d, v, &key))
                return mp_fail(L->err, "%s: link %d: '%s' is not a node id", L->path, (int)i + 1, ends[k]);
            *slot[k] = find_node(L, &key);
            if (*slot[k] < 0)
                return mp_fail(L->err, "%s: link %d: dangling: no node has the id %s", L->path, (int)i + 1, key.key);
        }
        if (L->lsrc[i] == L->ldst[i])
            return mp_fail(L->err, "%s: the links have a cycle (node %s links to itself)", L->path,
                           L->nodes[L->lsrc[i]].key);
    }
    return 0;
}

/* The order the file gives itself (Moccasin's graph.order, a JSON list in a
 * string), when it is a permutation of the nodes that every link respects: the
 * schedule the graph was published with. 1 when used, 0 when absent or unusable. */
static int file_order(loader *L, int32_t *order)
{
    const mp_jdoc *d = L->d;
    int32_t graph = mp_jdoc_member(d, 0, "graph"), text = graph >= 0 ? mp_jdoc_member(d, graph, "order") : -1;
    if (text < 0 || d->node[text].type != MP_JSTR) return 0;
    mp_jdoc list;
    mp_err ignored = {{0}};
    if (mp_jdoc_parse(d->node[text].str, (size_t)d->node[text].len, &list, &ignored)) return 0;
    int32_t n = 0, *pos = malloc(((size_t)L->n + 1) * sizeof *pos);
    bool ok = pos && list.node[0].type == MP_JARR && list.node[0].count == L->n;
    for (int32_t i = 0; ok && i < L->n; i++) pos[i] = -1;
    for (int32_t e = ok ? mp_jdoc_first(&list, 0) : -1; ok && e >= 0; e = mp_jdoc_next(&list, 0, e)) {
        jnode key;
        int32_t v = id_key(&list, e, &key) ? -1 : find_node(L, &key);
        ok = v >= 0 && pos[v] < 0;
        if (ok) pos[v] = n, order[n++] = v;
    }
    for (int32_t i = 0; ok && i < L->nlinks; i++) ok = pos[L->lsrc[i]] < pos[L->ldst[i]];
    free(pos);
    mp_jdoc_free(&list);
    return ok && n == L->n;
}

/* pass 3: the file's own order when it has a valid one, else the file order
 * of the nodes when every link goes forward in it, else Kahn's algorithm
 * taking the smallest ready id first (a binary heap). */
static int topo_order(loader *L, int32_t *order)
{
    if (file_order(L, order)) return 0;
    bool forward = true;
    for (int32_t i = 0; i < L->nlinks && forward; i++) forward = L->lsrc[i] < L->ldst[i];
    if (forward) {
        for (int32_t i = 0; i < L->n; i++) order[i] = i;
        return 0;
    }
    int32_t n = L->n, *indeg = calloc((size_t)n + 1, sizeof *indeg), *off = calloc((size_t)n + 2, sizeof *off);
    int32_t *succ = malloc(((size_t)L->nlinks + 1) * sizeof *succ), *heap = malloc(((size_t)n + 1) * sizeof *heap);
    int rc = -1;
    if (!indeg || !off || !succ || !heap) {
        mp_fail(L->err, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < L->nlinks; i++) {
        indeg[L->ldst[i]]++;
        off[L->lsrc[i] + 1]++;
    }
    for (int32_t i = 0; i < n; i++) off[i + 1] += off[i];
    for (int32_t i = 0; i < L->nlinks; i++) succ[off[L->lsrc[i]]++] = L->ldst[i];
    for (int32_t i = n; i > 0; i--) off[i] = off[i - 1]; /* filling moved each start to the next one's */
    off[0] = 0;
    int32_t nh = 0, placed = 0;
#define LESS(a, b) (cmp_key(&L->nodes[heap[a]], &L->nodes[heap[b]]) < 0)
#define SWAP(a, b) do { int32_t t_ = heap[a]; heap[a] = heap[b]; heap[b] = t_; } while (0)
    for (int32_t i = 0; i < n; i++)
        if (!indeg[i]) {
            heap[nh] = i;
            for (int32_t c = nh++; c > 0 && LESS(c, (c - 1) / 2); c = (c - 1) / 2) SWAP(c, (c - 1) / 2);
        }
    while (nh > 0) {
        int32_t u = heap[0];
        heap[0] = heap[--nh];
        for (int32_t c = 0;;) {
            int32_t l = 2 * c + 1, r = l + 1, m = c;
            if (l < nh && LESS(l, m)) m = l;
            if (r < nh && LESS(r, m)) m = r;
            if (m == c) break;
            SWAP(c, m);
            c = m;
        }
        order[placed++] = u;
        for (int32_t k = off[u]; k < off[u + 1]; k++)
            if (--indeg[succ[k]] == 0) {
                heap[nh] = succ[k];
                for (int32_t c = nh++; c > 0 && LESS(c, (c - 1) / 2); c = (c - 1) / 2) SWAP(c, (c - 1) / 2);
            }
    }
#undef LESS
#undef SWAP
    if (placed < n) {
        /* every node left has a predecessor left: walking back n steps lands on a cycle.
         * The successor lists, refilled as predecessor lists, guide the walk. */
        memset(off, 0, ((size_t)n + 2) * sizeof *off);
        for (int32_t i = 0; i < L->nlinks; i++) off[L->ldst[i] + 1]++;
        for (int32_t i = 0; i < n; i++) off[i + 1] += off[i];
        for (int32_t i = 0; i < L->nlinks; i++) succ[off[L->ldst[i]]++] = L->lsrc[i];
        for (int32_t i = n; i > 0; i--) off[i] = off[i - 1];
        off[0] = 0;
        int32_t u = 0;
        while (!indeg[u]) u++;
        for (int32_t step = 0; step < n; step++)
            for (int32_t k = off[u]; k < off[u + 1]; k++)
                if (indeg[succ[k]]) {
                    u = succ[k];
                    break;
                }
        mp_fail(L->err, "%s: the links have a cycle (through node %s)", L->path, L->nodes[u].key);
        goto done;
    }
    rc = 0;
done:
    free(indeg);
    free(off);
    free(succ);
    free(heap);
    return rc;
}

/* pass 4: the rgraph. Value j is node j's output; resident parameter bytes
 * (Moccasin's param_cost) become one resident value per node that has some. */
static int build(loader *L, const int32_t *order, mp_rgraph *rg)
{
    int32_t n = L->n, nparam = 0;
    int32_t *step = malloc(((size_t)n + 1) * sizeof *step);
    if (!step) return mp_fail(L->err, "out of memory");
    for (int32_t s = 0; s < n; s++) step[order[s]] = s;
    for (int32_t i = 0; i < n; i++) nparam += L->nodes[i].param > 0;
    int32_t nv = n + nparam;
    rg->nnodes = n;
    rg->nvalues = nv;
    rg->node_name = calloc((size_t)n + 1, sizeof *rg->node_name);
    rg->cost = calloc((size_t)n + 1, sizeof *rg->cost);
    rg->recomputable = calloc((size_t)n + 1, 1);
    rg->in_off = calloc((size_t)n + 2, sizeof *rg->in_off);
    rg->in = malloc(((size_t)L->nlinks + nparam + 1) * sizeof *rg->in);
    rg->out_off = calloc((size_t)n + 2, sizeof *rg->out_off);
    rg->out = malloc(((size_t)n + 1) * sizeof *rg->out);
    rg->bytes = calloc((size_t)nv + 1, sizeof *rg->bytes);
    rg->producer = malloc(((size_t)nv + 1) * sizeof *rg->producer);
    rg->keep_to_end = calloc((size_t)nv + 1, 1);
    rg->pinned = calloc((size_t)nv + 1, 1);
    rg->value_id = malloc(((size_t)nv + 1) * sizeof *rg->value_id);
    if (!rg->node_name || !rg->cost || !rg->recomputable || !rg->in_off || !rg->in || !rg->out_off || !rg->out ||
        !rg->bytes || !rg->producer || !rg->keep_to_end || !rg->pinned || !rg->value_id) {
        free(step);
        return mp_fail(L->err, "out of memory");
    }
    /* inputs per step: predecessors' values (deduplicated), then the node's parameters */
    int32_t *indeg = rg->in_off + 1;
    for (int32_t k = 0; k < L->nlinks; k++) indeg[step[L->ldst[k]]]++;
    for (int32_t i = 0; i < n; i++) indeg[step[i]] += L->nodes[i].param > 0;
    for (int32_t s = 0; s < n; s++) rg->in_off[s + 1] += rg->in_off[s];
    int32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!fill) {
        free(step);
        return mp_fail(L->err, "out of memory");
    }
    memcpy(fill, rg->in_off, (size_t)n * sizeof *fill);
    for (int32_t k = 0; k < L->nlinks; k++) rg->in[fill[step[L->ldst[k]]]++] = step[L->lsrc[k]];
    int32_t pv = n;
    for (int32_t s = 0; s < n; s++) {
        const jnode *x = &L->nodes[order[s]];
        if (x->param > 0) {
            rg->bytes[pv] = x->param;
            rg->producer[pv] = -1;
            rg->value_id[pv] = -1;
            rg->in[fill[s]++] = pv++;
        }
    }
    free(fill);
    /* compact duplicate links (a multigraph file) in place */
    int32_t w = 0;
    for (int32_t s = 0; s < n; s++) {
        int32_t a = rg->in_off[s], b = rg->in_off[s + 1];
        rg->in_off[s] = w;
        for (int32_t k = a; k < b; k++) {
            bool dup = false;
            for (int32_t q = rg->in_off[s]; q < w && !dup; q++) dup = rg->in[q] == rg->in[k];
            if (!dup) rg->in[w++] = rg->in[k];
        }
    }
    rg->in_off[n] = w;
    for (int32_t s = 0; s < n; s++) {
        const jnode *x = &L->nodes[order[s]];
        rg->node_name[s] = strdup(x->key);
        if (!rg->node_name[s]) {
            free(step);
            return mp_fail(L->err, "out of memory");
        }
        rg->cost[s] = x->cost;
        rg->recomputable[s] = !x->backward;
        rg->out[s] = s;
        rg->out_off[s + 1] = s + 1;
        rg->bytes[s] = x->bytes;
        rg->producer[s] = s;
        rg->value_id[s] = -1;
    }
    free(step);
    return 0;
}

int mp_rgraph_from_json(const char *path, mp_rgraph *rg, mp_err *err)
{
    memset(rg, 0, sizeof *rg);
    mp_jdoc d;
    if (mp_jdoc_load(path, &d, err)) return -1;
    loader L = {.path = path, .d = &d, .dl = &checkmate, .err = err};
    int32_t *order = NULL;
    int rc = -1;
    int32_t nodes = mp_jdoc_member(&d, 0, "nodes"), links = mp_jdoc_member(&d, 0, "links");
    if (d.node[0].type != MP_JOBJ || nodes < 0 || links < 0 || d.node[nodes].type != MP_JARR ||
        d.node[links].type != MP_JARR) {
        mp_fail(err, "%s: not a node-link graph (expected an object with arrays 'nodes' and 'links')", path);
        goto done;
    }
    if (d.node[nodes].count == 0) {
        mp_fail(err, "%s: the graph has no nodes", path);
        goto done;
    }
    if (read_nodes(&L, nodes) || read_links(&L, links)) goto done;
    order = malloc(((size_t)L.n + 1) * sizeof *order);
    if (!order) {
        mp_fail(err, "out of memory");
        goto done;
    }
    if (topo_order(&L, order) || build(&L, order, rg)) goto done;
    rc = 0;
done:
    if (rc) mp_rgraph_free(rg);
    free(order);
    free(L.nodes);
    free(L.by_key);
    free(L.lsrc);
    free(L.ldst);
    mp_jdoc_free(&d);
    return rc;
}
