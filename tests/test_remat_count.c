/* test_remat_count.c - the recount of rematerialization orders and the
 * baselines: hand-built rgraphs with hand-computed peaks and costs, the
 * recount refusing bad orders, the store-everything peak against a naive
 * count, the --schedule JSON, and every baseline's order accepted by the
 * recount with the peaks and costs its strategy implies, on hand-built
 * graphs and on the Checkmate training graphs of ../shared/remat-graphs. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passes/remat.h"

/* ---- building rgraphs by hand ---------------------------------------------- */

enum { MAXN = 4096, MAXV = 8192, MAXE = 8 };

static void tg_init(mp_rgraph *rg)
{
    memset(rg, 0, sizeof *rg);
    rg->node_name = calloc(MAXN, sizeof *rg->node_name);
    rg->cost = calloc(MAXN, sizeof *rg->cost);
    rg->recomputable = calloc(MAXN, 1);
    rg->in_off = calloc(MAXN + 1, sizeof *rg->in_off);
    rg->out_off = calloc(MAXN + 1, sizeof *rg->out_off);
    rg->in = calloc(MAXN * MAXE, sizeof *rg->in);
    rg->out = calloc(MAXN * MAXE, sizeof *rg->out);
    rg->bytes = calloc(MAXV, sizeof *rg->bytes);
    rg->producer = calloc(MAXV, sizeof *rg->producer);
    rg->keep_to_end = calloc(MAXV, 1);
    rg->pinned = calloc(MAXV, 1);
    rg->value_id = calloc(MAXV, sizeof *rg->value_id);
}

/* A value of `bytes`, resident until a node outputs it. */
static int32_t tg_value(mp_rgraph *rg, int64_t bytes)
{
    ck_assert_int_lt(rg->nvalues, MAXV);
    rg->bytes[rg->nvalues] = bytes;
    rg->producer[rg->nvalues] = -1;
    rg->value_id[rg->nvalues] = -1;
    return rg->nvalues++;
}

static int32_t tg_node(mp_rgraph *rg, const char *name, double cost, bool forward, int nin, const int32_t *in,
                       int nout, const int32_t *out)
{
    int32_t u = rg->nnodes++;
    ck_assert_int_lt(u, MAXN);
    ck_assert(nin <= MAXE && nout <= MAXE);
    rg->node_name[u] = strdup(name);
    rg->cost[u] = cost;
    rg->recomputable[u] = forward;
    rg->in_off[u + 1] = rg->in_off[u] + nin;
    rg->out_off[u + 1] = rg->out_off[u] + nout;
    for (int k = 0; k < nin; k++) rg->in[rg->in_off[u] + k] = in[k];
    for (int k = 0; k < nout; k++) {
        rg->out[rg->out_off[u] + k] = out[k];
        rg->producer[out[k]] = u;
    }
    return u;
}

/* An order from node ids; recompute is set on ids given as ~id. */
static mp_rsched order_of(int n, const int32_t *ids)
{
    mp_rsched s = {n, malloc(n * sizeof(int32_t)), calloc(n, 1)};
    for (int e = 0; e < n; e++) {
        s.node[e] = ids[e] < 0 ? ~ids[e] : ids[e];
        s.recompute[e] = ids[e] < 0;
    }
    return s;
}

static mp_rcount count_ok(const mp_rgraph *rg, const mp_rsched *s)
{
    mp_err err = {{0}};
    mp_rcount c;
    ck_assert_msg(mp_rsched_count(rg, s, &c, &err) == 0, "%s", err.msg);
    return c;
}

static mp_rcount count_identity(const mp_rgraph *rg)
{
    mp_err err = {{0}};
    mp_rsched s;
    ck_assert_msg(mp_rsched_identity(rg, &s, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(s.n, rg->nnodes);
    mp_rcount c = count_ok(rg, &s);
    mp_rsched_free(&s);
    return c;
}

/* ---- the recount on hand-counted graphs ------------------------------------ */

/* x(10, resident) -> n0 -> a(100) -> n1 -> b(200) -> n2 -> c(400, nothing reads it)
 *   entry 0: 10 + 100 = 110; entry 1: 110 + 200 = 310, a freed; entry 2: 10 + 200 + 400 = 610 */
START_TEST(test_chain)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t x = tg_value(&rg, 10), a = tg_value(&rg, 100), b = tg_value(&rg, 200), c = tg_value(&rg, 400);
    tg_node(&rg, "n0", 1, true, 1, &x, 1, &a);
    tg_node(&rg, "n1", 2, true, 1, &a, 1, &b);
    tg_node(&rg, "n2", 4, true, 1, &b, 1, &c);
    mp_rcount k = count_identity(&rg);
    ck_assert_int_eq(k.peak_bytes, 610);
    ck_assert_int_eq(k.peak_entry, 2);
    ck_assert_double_eq(k.cost, 7);
    ck_assert_double_eq(k.recompute_cost, 0);
    mp_rsched s = order_of(3, (int32_t[]){0, 1, 2});
    int64_t live[3];
    mp_err err = {{0}};
    ck_assert_int_eq(mp_rsched_profile(&rg, &s, live, &err), 0);
    ck_assert_int_eq(live[0], 110);
    ck_assert_int_eq(live[1], 310);
    ck_assert_int_eq(live[2], 610);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* n0 -> a(100); n1: b(10) = f(a); n2: c(20) = f(a); n3: d(5, keep_to_end) = f(b, c)
 *   100, 110, 130 (a freed after), 35 */
START_TEST(test_diamond)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t a = tg_value(&rg, 100), b = tg_value(&rg, 10), c = tg_value(&rg, 20), d = tg_value(&rg, 5);
    rg.keep_to_end[d] = 1;
    tg_node(&rg, "n0", 1, true, 0, NULL, 1, &a);
    tg_node(&rg, "n1", 1, true, 1, &a, 1, &b);
    tg_node(&rg, "n2", 1, true, 1, &a, 1, &c);
    tg_node(&rg, "n3", 1, false, 2, (int32_t[]){b, c}, 1, &d);
    mp_rcount k = count_identity(&rg);
    ck_assert_int_eq(k.peak_bytes, 130);
    ck_assert_int_eq(k.peak_entry, 2);
    mp_rsched s = order_of(4, (int32_t[]){0, 1, 2, 3});
    int64_t live[4];
    mp_err err = {{0}};
    ck_assert_int_eq(mp_rsched_profile(&rg, &s, live, &err), 0);
    ck_assert_int_eq(live[3], 35);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* n0: a(100), b(50); n1: c(10, unread) = f(a); n2: d(1, unread) = f(b)
 *   150, 160 (a and c freed after), 51 */
START_TEST(test_multi_output)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t a = tg_value(&rg, 100), b = tg_value(&rg, 50), c = tg_value(&rg, 10), d = tg_value(&rg, 1);
    tg_node(&rg, "n0", 1, true, 0, NULL, 2, (int32_t[]){a, b});
    tg_node(&rg, "n1", 1, true, 1, &a, 1, &c);
    tg_node(&rg, "n2", 1, true, 1, &b, 1, &d);
    mp_rsched s = order_of(3, (int32_t[]){0, 1, 2});
    int64_t live[3];
    mp_err err = {{0}};
    ck_assert_int_eq(mp_rsched_profile(&rg, &s, live, &err), 0);
    ck_assert_int_eq(live[0], 150);
    ck_assert_int_eq(live[1], 160);
    ck_assert_int_eq(live[2], 51);
    ck_assert_int_eq(count_ok(&rg, &s).peak_bytes, 160);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* n0: a(100, cost 3); n1: b(10) = f(a); n2: c(1000) = f(b); n3: d(1) = f(a, c)
 *   store everything: 100, 110, 1110, 1101 -> peak 1110 at entry 2
 *   a recomputed before n3: 100, 110 (a freed: its next use follows its
 *   recomputation), 1010, 1100, 1101 -> peak 1101 at entry 4, recompute cost 3 */
START_TEST(test_recompute_frees_original)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t a = tg_value(&rg, 100), b = tg_value(&rg, 10), c = tg_value(&rg, 1000), d = tg_value(&rg, 1);
    tg_node(&rg, "n0", 3, true, 0, NULL, 1, &a);
    tg_node(&rg, "n1", 1, true, 1, &a, 1, &b);
    tg_node(&rg, "n2", 1, true, 1, &b, 1, &c);
    tg_node(&rg, "n3", 1, false, 2, (int32_t[]){a, c}, 1, &d);
    mp_rcount k = count_identity(&rg);
    ck_assert_int_eq(k.peak_bytes, 1110);
    ck_assert_int_eq(k.peak_entry, 2);
    mp_rsched s = order_of(5, (int32_t[]){0, 1, 2, ~0, 3});
    k = count_ok(&rg, &s);
    ck_assert_int_eq(k.peak_bytes, 1101);
    ck_assert_int_eq(k.peak_entry, 4);
    ck_assert_double_eq(k.cost, 9);
    ck_assert_double_eq(k.recompute_cost, 3);
    int64_t live[5];
    mp_err err = {{0}};
    ck_assert_int_eq(mp_rsched_profile(&rg, &s, live, &err), 0);
    ck_assert_int_eq(live[1], 110);
    ck_assert_int_eq(live[2], 1010);
    ck_assert_int_eq(live[3], 1100);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* a(100, keep_to_end) stays alive, so computing it again replaces it (counted
 * once); x(7) is resident throughout.
 *   n0: a = f(x); n1: b(10, unread) = f(a); order n0, n1, n0*, n1*:
 *   107, 117, 107, 117 -> peak 117 at entry 1; recompute cost 2 + 5 */
START_TEST(test_replace_keep_to_end)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t x = tg_value(&rg, 7), a = tg_value(&rg, 100), b = tg_value(&rg, 10);
    rg.keep_to_end[a] = 1;
    tg_node(&rg, "n0", 2, true, 1, &x, 1, &a);
    tg_node(&rg, "n1", 5, true, 1, &a, 1, &b);
    mp_rsched s = order_of(4, (int32_t[]){0, 1, ~0, ~1});
    int64_t live[4];
    mp_err err = {{0}};
    ck_assert_int_eq(mp_rsched_profile(&rg, &s, live, &err), 0);
    ck_assert_int_eq(live[0], 107);
    ck_assert_int_eq(live[1], 117);
    ck_assert_int_eq(live[2], 107);
    ck_assert_int_eq(live[3], 117);
    mp_rcount k = count_ok(&rg, &s);
    ck_assert_int_eq(k.peak_bytes, 117);
    ck_assert_int_eq(k.peak_entry, 1);
    ck_assert_double_eq(k.cost, 14);
    ck_assert_double_eq(k.recompute_cost, 7);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

START_TEST(test_rejects_bad_orders)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t a = tg_value(&rg, 100), b = tg_value(&rg, 10), c = tg_value(&rg, 1);
    tg_node(&rg, "first", 1, true, 0, NULL, 1, &a);
    tg_node(&rg, "second", 1, true, 1, &a, 1, &b);
    tg_node(&rg, "third", 1, false, 2, (int32_t[]){a, b}, 1, &c);
    mp_err err = {{0}};
    mp_rcount k;
    /* "second" before "first": its input is not computed yet (frees follow last uses, so that is the only way) */
    mp_rsched s = order_of(2, (int32_t[]){1, 0});
    ck_assert_int_eq(mp_rsched_count(&rg, &s, &k, &err), -1);
    ck_assert_msg(strstr(err.msg, "'second'") && strstr(err.msg, "value 0") && strstr(err.msg, "'first'"), "%s",
                  err.msg);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    mp_rsched_free(&s);
    s = order_of(3, (int32_t[]){0, 2, 1});
    ck_assert_int_eq(mp_rsched_count(&rg, &s, &k, &err), -1);
    ck_assert_msg(strstr(err.msg, "'third'") && strstr(err.msg, "value 1"), "%s", err.msg);
    mp_rsched_free(&s);
    s = order_of(2, (int32_t[]){0, 7});
    ck_assert_int_eq(mp_rsched_count(&rg, &s, &k, &err), -1);
    ck_assert_msg(strstr(err.msg, "node 7"), "%s", err.msg);
    mp_rsched_free(&s);
    /* a malformed graph: an output whose producer is another node */
    rg.producer[b] = 0;
    s = order_of(1, (int32_t[]){0});
    ck_assert_int_eq(mp_rsched_count(&rg, &s, &k, &err), -1);
    ck_assert_msg(strstr(err.msg, "'second'"), "%s", err.msg);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* ---- random training-like graphs ------------------------------------------- */

static uint32_t rnd_state;
static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 1664525u + 1013904223u;
    return (rnd_state >> 8) % n;
}

/* A forward pass of m nodes over resident x, each reading one or two earlier
 * forward values, some writing a second (side) output or a pinned one; a
 * loss; and a backward node per forward node in reverse, reading the previous
 * gradient, its forward node's inputs and outputs. */
static void random_training(mp_rgraph *rg, int m, uint32_t seed)
{
    rnd_state = seed;
    tg_init(rg);
    static int32_t fv[MAXN], side[MAXN], fin[MAXN][2], nfin[MAXN];
    int32_t x = tg_value(rg, 1 + rnd(1000));
    char name[32];
    for (int i = 0; i < m; i++) {
        fv[i] = tg_value(rg, 1 + rnd(1000));
        side[i] = rnd(5) == 0 ? tg_value(rg, 1 + rnd(100)) : -1;
        rg->pinned[fv[i]] = rnd(9) == 0;
        nfin[i] = 1 + (i > 1 && rnd(3) == 0);
        for (int k = 0; k < nfin[i]; k++) fin[i][k] = i == 0 ? x : fv[i - 1 - (k ? rnd(i) : 0)];
        snprintf(name, sizeof name, "f%d", i);
        tg_node(rg, name, 1 + rnd(10), true, nfin[i], fin[i], 1 + (side[i] >= 0), (int32_t[]){fv[i], side[i]});
    }
    int32_t g = tg_value(rg, 8);
    tg_node(rg, "loss", 1, true, 1, &fv[m - 1], 1, &g);
    for (int i = m - 1; i >= 0; i--) {
        int32_t in[5] = {g, fv[i], fin[i][0], fin[i][nfin[i] - 1], side[i]};
        int32_t ng = tg_value(rg, 1 + rnd(1000));
        if (i == 0) rg->keep_to_end[ng] = 1;
        snprintf(name, sizeof name, "b%d", i);
        tg_node(rg, name, 1 + rnd(10), false, 4 + (side[i] >= 0), in, 1, &ng);
        g = ng;
    }
}

/* Live bytes at step i of the store-everything order, counted the slow way:
 * a value lives from its producer to its last reader (keep_to_end: to the end). */
static int64_t naive_live(const mp_rgraph *rg, int32_t i)
{
    int64_t sum = 0;
    for (int32_t v = 0; v < rg->nvalues; v++) {
        int32_t p = rg->producer[v], last = p;
        for (int32_t k = 0; k < rg->in_off[rg->nnodes]; k++)
            if (rg->in[k] == v)
                for (int32_t u = 0; u < rg->nnodes; u++)
                    if (k >= rg->in_off[u] && k < rg->in_off[u + 1] && u > last) last = u;
        if (p < 0 || (p <= i && (i <= last || rg->keep_to_end[v]))) sum += rg->bytes[v];
    }
    return sum;
}

START_TEST(test_identity_matches_naive)
{
    for (uint32_t seed = 1; seed <= 5; seed++) {
        mp_rgraph rg;
        random_training(&rg, 40, seed);
        mp_rsched s;
        mp_err err = {{0}};
        ck_assert_int_eq(mp_rsched_identity(&rg, &s, &err), 0);
        int64_t *live = malloc(s.n * sizeof *live), max = 0;
        ck_assert_int_eq(mp_rsched_profile(&rg, &s, live, &err), 0);
        for (int32_t i = 0; i < s.n; i++) {
            int64_t want = naive_live(&rg, i);
            ck_assert_int_eq(live[i], want);
            if (want > max) max = want;
        }
        ck_assert_int_eq(count_ok(&rg, &s).peak_bytes, max);
        free(live);
        mp_rsched_free(&s);
        mp_rgraph_free(&rg);
    }
}
END_TEST

/* Live bytes at entry e of any order, the slow way: a value's latest
 * computation at or before e is alive there if it is e itself, if it is
 * kept to the end, or if an entry from e on reads it before the value is
 * computed again. -1 if an input of e was never computed before e. */
static int64_t naive_entry(const mp_rgraph *rg, const mp_rsched *s, int32_t e)
{
    int32_t u = s->node[e];
    for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) {
        int32_t v = rg->in[k], c = -1;
        for (int32_t x = 0; x < e; x++)
            if (s->node[x] == rg->producer[v]) c = x;
        if (rg->producer[v] >= 0 && c < 0) return -1;
    }
    int64_t sum = 0;
    for (int32_t v = 0; v < rg->nvalues; v++) {
        int32_t p = rg->producer[v], c = -1, next = s->n;
        if (p < 0) {
            sum += rg->bytes[v];
            continue;
        }
        for (int32_t x = 0; x <= e; x++)
            if (s->node[x] == p) c = x;
        for (int32_t x = s->n - 1; x > e; x--)
            if (s->node[x] == p) next = x;
        bool alive = c == e || (c >= 0 && rg->keep_to_end[v]);
        for (int32_t r = e; r < next && c >= 0 && !alive; r++)
            for (int32_t k = rg->in_off[s->node[r]]; k < rg->in_off[s->node[r] + 1]; k++)
                if (rg->in[k] == v && r > c) alive = true; /* at c it read the previous one */
        if (alive) sum += rg->bytes[v];
    }
    return sum;
}

/* Random orders with recomputations inserted (some of them invalid): the
 * recount agrees with the slow count on every entry, and refuses exactly the
 * orders that read a value before any computation of it. */
START_TEST(test_recount_matches_naive)
{
    int refused = 0, accepted = 0;
    for (uint32_t seed = 1; seed <= 60; seed++) {
        mp_rgraph rg;
        random_training(&rg, 12, seed);
        int32_t n = rg.nnodes, m = n + 12;
        mp_rsched s = {m, malloc(m * sizeof(int32_t)), calloc(m, 1)};
        int32_t e = 0, i = 0;
        while (e < m) {
            if (i < n && (rnd(3) != 0 || m - e == n - i)) {
                s.node[e++] = i++;
            } else {
                s.node[e] = (int32_t)rnd(seed % 4 == 0 ? (uint32_t)n : (uint32_t)(i > 0 ? i : 1));
                s.recompute[e++] = 1;
            }
        }
        int64_t *live = malloc(m * sizeof *live);
        mp_err err = {{0}};
        int rc = mp_rsched_profile(&rg, &s, live, &err);
        bool valid = true;
        for (int32_t x = 0; x < m && valid; x++) valid = naive_entry(&rg, &s, x) >= 0;
        ck_assert_msg(rc == (valid ? 0 : -1), "seed %u: %s", seed, err.msg);
        if (valid) {
            for (int32_t x = 0; x < m; x++) ck_assert_int_eq(live[x], naive_entry(&rg, &s, x));
            accepted++;
        } else {
            ck_assert_msg(strstr(err.msg, "is not computed before it"), "%s", err.msg);
            refused++;
        }
        free(live);
        mp_rsched_free(&s);
        mp_rgraph_free(&rg);
    }
    ck_assert_int_gt(accepted, 10);
    ck_assert_int_gt(refused, 3);
}
END_TEST

/* ---- the --schedule file ---------------------------------------------------- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

START_TEST(test_write_json)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t a = tg_value(&rg, 1), b = tg_value(&rg, 1);
    tg_node(&rg, "conv \"1\"\\x", 1, true, 0, NULL, 1, &a);
    tg_node(&rg, "line\nbreak\x01", 1, false, 1, &a, 1, &b);
    char dir[] = "/tmp/remat_json_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/sched.json", dir);
    mp_rsched s = order_of(3, (int32_t[]){0, ~0, 1});
    mp_err err = {{0}};
    ck_assert_msg(mp_rsched_write_json(&rg, &s, path, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(slurp(path), "[\n  \"conv \\\"1\\\"\\\\x\",\n  \"conv \\\"1\\\"\\\\x\",\n"
                                  "  \"line\\nbreak\\u0001\"\n]\n");
    unlink(path);
    /* an empty order is an empty list; a bad directory fails and leaves nothing */
    mp_rsched empty = {0, NULL, NULL};
    ck_assert_int_eq(mp_rsched_write_json(&rg, &empty, path, &err), 0);
    ck_assert_str_eq(slurp(path), "[]\n");
    unlink(path);
    snprintf(path, sizeof path, "%s/missing/sched.json", dir);
    ck_assert_int_eq(mp_rsched_write_json(&rg, &s, path, &err), -1);
    ck_assert_msg(strstr(err.msg, "missing"), "%s", err.msg);
    ck_assert_int_eq(rmdir(dir), 0); /* empty: no temporary file left */
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* ---- baselines ---------------------------------------------------------------- */

/* n residual-like blocks over resident x0: a_i = f(x_i) (A bytes), x_{i+1} =
 * g(a_i, x_i) (X bytes); a loss; backward b_i reads the gradient, a_i and x_i.
 * The articulation values are x_1..x_n and a_0; the other a_i are not. */
static void block_chain(mp_rgraph *rg, int n, int64_t A, int64_t X)
{
    tg_init(rg);
    int32_t xs[MAXN], as[MAXN];
    char name[32];
    xs[0] = tg_value(rg, X);
    for (int i = 0; i < n; i++) {
        as[i] = tg_value(rg, A);
        xs[i + 1] = tg_value(rg, X);
        snprintf(name, sizeof name, "f%d", i);
        tg_node(rg, name, 1, true, 1, &xs[i], 1, &as[i]);
        snprintf(name, sizeof name, "g%d", i);
        tg_node(rg, name, 2, true, 2, (int32_t[]){as[i], xs[i]}, 1, &xs[i + 1]);
    }
    int32_t g = tg_value(rg, 4);
    tg_node(rg, "loss", 1, true, 1, &xs[n], 1, &g);
    for (int i = n - 1; i >= 0; i--) {
        int32_t ng = tg_value(rg, X);
        snprintf(name, sizeof name, "b%d", i);
        tg_node(rg, name, 3, false, 3, (int32_t[]){g, as[i], xs[i]}, 1, &ng);
        g = ng;
    }
    rg->keep_to_end[g] = 1;
}

static mp_rcount baseline(const mp_rgraph *rg, mp_rbaseline b, int64_t budget)
{
    mp_err err = {{0}};
    mp_rsched s;
    ck_assert_msg(mp_remat_baseline(rg, b, budget, &s, &err) == 0, "%s: %s", mp_rbaseline_names[b], err.msg);
    mp_rcount c = count_ok(rg, &s);
    int32_t again = 0;
    for (int32_t e = 0; e < s.n; e++) {
        again += s.recompute[e];
        if (!s.recompute[e]) continue;
        int32_t u = s.node[e]; /* only forward nodes run again, and never one writing a pinned value */
        ck_assert_msg(rg->recomputable[u], "%s reruns '%s'", mp_rbaseline_names[b], rg->node_name[u]);
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) ck_assert(!rg->pinned[rg->out[k]]);
    }
    ck_assert_int_eq(s.n - again, rg->nnodes); /* every node once, plus recomputations */
    mp_rsched_free(&s);
    return c;
}

START_TEST(test_baselines_block_chain)
{
    mp_rgraph rg;
    block_chain(&rg, 25, 1000, 10);
    mp_rcount none = baseline(&rg, MP_RBASE_NONE, 0), all = baseline(&rg, MP_RBASE_ALL, 0),
              sq = baseline(&rg, MP_RBASE_SQRT, 0);
    ck_assert_int_eq(none.peak_bytes, count_identity(&rg).peak_bytes);
    ck_assert_double_eq(none.recompute_cost, 0);
    /* all keeps x_1..x_25 and brings back one a_i at a time; sqrt keeps x_5,
     * x_10, .., recomputing five blocks at once */
    ck_assert_int_lt(all.peak_bytes, sq.peak_bytes);
    ck_assert_int_lt(sq.peak_bytes, none.peak_bytes);
    ck_assert_int_le(all.peak_bytes, 2 * 1000 + 30 * 10 + 4);
    /* all recomputes only the a_i (f, cost 1), except a_0 (x0 is resident, so
     * a_0 is an articulation value too); sqrt recomputes g_i too, costing more */
    ck_assert_double_eq(all.recompute_cost, 24);
    ck_assert_double_gt(sq.recompute_cost, all.recompute_cost);
    for (int b = MP_RBASE_GREEDY; b <= MP_RBASE_LOOKAHEAD; b++) {
        /* greedy and lookahead fit a budget between the two */
        int64_t budget = (all.peak_bytes + none.peak_bytes) / 2;
        mp_rcount gr = baseline(&rg, b, budget);
        ck_assert_int_le(gr.peak_bytes, budget);
        ck_assert_double_gt(gr.recompute_cost, 0);
        budget = all.peak_bytes;
        gr = baseline(&rg, b, budget);
        ck_assert_int_le(gr.peak_bytes, budget);
        /* below what any order needs: a clear failure, naming the baseline */
        mp_err err = {{0}};
        mp_rsched s;
        ck_assert_int_eq(mp_remat_baseline(&rg, b, 1005, &s, &err), -1);
        ck_assert_msg(strstr(err.msg, mp_rbaseline_names[b]) && strstr(err.msg, "1005"), "%s", err.msg);
    }
    mp_rgraph_free(&rg);
}
END_TEST

/* m is pinned (it cannot be recomputed), so when greedy evicts a and runs f1
 * again for the backward, m must still be there: it stays while a may be
 * needed. x(10, resident); f0: m(10) = f(x); f1: a(1000) = f(m); f2: c(1000)
 * = f(a); f3: d(1000) = f(c); b3: g3(10) = f(d); b2: g2(10) = f(g3, c); b1:
 * g1(10, kept to the end) = f(g2, a). Store everything peaks at f3: 3020. */
START_TEST(test_greedy_keeps_pinned_inputs)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t x = tg_value(&rg, 10), m = tg_value(&rg, 10), a = tg_value(&rg, 1000), c = tg_value(&rg, 1000);
    int32_t d = tg_value(&rg, 1000), g3 = tg_value(&rg, 10), g2 = tg_value(&rg, 10), g1 = tg_value(&rg, 10);
    rg.pinned[m] = 1;
    rg.keep_to_end[g1] = 1;
    tg_node(&rg, "f0", 1, true, 1, &x, 1, &m);
    int32_t f1 = tg_node(&rg, "f1", 1, true, 1, &m, 1, &a);
    tg_node(&rg, "f2", 1, true, 1, &a, 1, &c);
    tg_node(&rg, "f3", 1, true, 1, &c, 1, &d);
    tg_node(&rg, "b3", 1, false, 1, &d, 1, &g3);
    tg_node(&rg, "b2", 1, false, 2, (int32_t[]){g3, c}, 1, &g2);
    tg_node(&rg, "b1", 1, false, 2, (int32_t[]){g2, a}, 1, &g1);
    ck_assert_int_eq(count_identity(&rg).peak_bytes, 3020);
    for (int b = MP_RBASE_GREEDY; b <= MP_RBASE_LOOKAHEAD; b++) {
        mp_err err = {{0}};
        mp_rsched s;
        ck_assert_msg(mp_remat_baseline(&rg, b, 2100, &s, &err) == 0, "%s", err.msg);
        mp_rcount k = count_ok(&rg, &s);
        ck_assert_int_le(k.peak_bytes, 2100);
        ck_assert_double_eq(k.recompute_cost, 1);
        bool reran_f1 = false;
        for (int32_t e = 0; e < s.n; e++) reran_f1 |= s.recompute[e] && s.node[e] == f1;
        ck_assert_msg(reran_f1, "%s", mp_rbaseline_names[b]);
        mp_rsched_free(&s);
    }
    mp_rgraph_free(&rg);
}
END_TEST

/* An update in the backward (--optimizer-in-backward) overwrites the resident
 * W in place at step 4, so a node that read W may not run again after it. x,
 * W (10, resident); f1: a(1000) = f(x, W); f2: c(1000) = f(a); f3: d(1000) =
 * f(c); b3: g3(10) = f(d); up writes W in place from g3; b2: g2(10) = f(g3,
 * c); b1: g1(10, kept to the end) = f(g2, a); store everything peaks at b3
 * (3030). Below it greedy and lookahead would evict a (the stalest; the one
 * read last), and remaking it for b1 runs f1 after up: the recount refuses
 * such an order, so they must remake c. At 2100 the only plan drops a after
 * f2 and remakes it before up (after b3 frees d), which the ILP finds and the
 * on-demand baselines cannot. */
START_TEST(test_in_place_write_blocks_rerun)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t x = tg_value(&rg, 10), w = tg_value(&rg, 10), a = tg_value(&rg, 1000), c = tg_value(&rg, 1000);
    int32_t d = tg_value(&rg, 1000), g3 = tg_value(&rg, 10), g2 = tg_value(&rg, 10), g1 = tg_value(&rg, 10);
    rg.keep_to_end[g1] = 1;
    int32_t f1 = tg_node(&rg, "f1", 1, true, 2, (int32_t[]){x, w}, 1, &a);
    int32_t f2 = tg_node(&rg, "f2", 1, true, 1, &a, 1, &c);
    tg_node(&rg, "f3", 1, true, 1, &c, 1, &d);
    tg_node(&rg, "b3", 1, false, 1, &d, 1, &g3);
    int32_t up = tg_node(&rg, "up", 1, false, 2, (int32_t[]){w, g3}, 0, NULL);
    tg_node(&rg, "b2", 1, false, 2, (int32_t[]){g3, c}, 1, &g2);
    tg_node(&rg, "b1", 1, false, 2, (int32_t[]){g2, a}, 1, &g1);
    rg.write_off = calloc((size_t)rg.nvalues + 1, sizeof *rg.write_off);
    rg.write = malloc(sizeof *rg.write);
    rg.write[0] = up;
    for (int32_t v = w; v < rg.nvalues; v++) rg.write_off[v + 1] = 1; /* W's one write: step 4 */
    ck_assert_int_eq(mp_rgraph_next_write(&rg, w, f1), up);
    ck_assert_int_eq(mp_rgraph_next_write(&rg, w, up), rg.nnodes);
    ck_assert_int_eq(mp_rgraph_next_write(&rg, a, f1), rg.nnodes);
    ck_assert_int_eq(count_identity(&rg).peak_bytes, 3030); /* at b3: x, W, a, c, d, g3 */

    /* f1 again before b1 reads what up wrote: refused, naming both */
    mp_err err = {{0}};
    mp_rcount k;
    mp_rsched bad = order_of(8, (int32_t[]){0, 1, 2, 3, 4, 5, ~0, 6});
    ck_assert_int_eq(mp_rsched_count(&rg, &bad, &k, &err), -1);
    ck_assert_msg(strstr(err.msg, "'f1'") && strstr(err.msg, "'up'") && strstr(err.msg, "in place"), "%s", err.msg);
    mp_rsched_free(&bad);
    mp_rsched early = order_of(8, (int32_t[]){0, 1, 2, 3, ~0, 4, 5, 6}); /* before up: fine */
    count_ok(&rg, &early);
    mp_rsched_free(&early);

    for (int b = MP_RBASE_ALL; b <= MP_RBASE_LOOKAHEAD; b++) {
        mp_rsched s;
        ck_assert_msg(mp_remat_baseline(&rg, b, 3025, &s, &err) == 0, "%s: %s", mp_rbaseline_names[b], err.msg);
        k = count_ok(&rg, &s);
        if (b >= MP_RBASE_GREEDY) {
            ck_assert_int_le(k.peak_bytes, 3025);
            ck_assert_double_eq(k.recompute_cost, 1);
            ck_assert_int_eq(mp_remat_baseline(&rg, b, 2100, &(mp_rsched){0}, &err), -1); /* no order on demand */
        }
        for (int32_t e = 0; e < s.n; e++)
            ck_assert_msg(!s.recompute[e] || s.node[e] == f2, "%s reruns '%s'", mp_rbaseline_names[b],
                          rg.node_name[s.node[e]]);
        mp_rsched_free(&s);
    }
    /* the ILP's space offers no recipe running f1 after up; its plan at 2100 runs f1 again before up */
    mp_rspace sp;
    ck_assert_msg(mp_rspace_build(&rg, NULL, &sp, &err) == 0, "%s", err.msg);
    int f1_recipes = 0;
    for (int32_t i = 0; i < sp.ncand; i++)
        for (int32_t r = 0; r < sp.cand[i].nrecipe; r++)
            if (sp.cand[i].recipe[r] == f1) {
                f1_recipes++;
                ck_assert_int_le(sp.cand[i].step, up);
            }
    ck_assert_int_gt(f1_recipes, 0); /* a may still come back before up runs */
    mp_rplan p;
    mp_rsolve_info info;
    mp_rsolve_opts so = mp_rsolve_defaults();
    ck_assert_msg(mp_remat_solve(&sp, 2100, &so, &p, &info, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(info.status, MP_RSOLVE_OPTIMAL);
    mp_rsched s;
    ck_assert_msg(mp_rplan_emit(&sp, &p, &s, &err) == 0, "%s", err.msg);
    k = count_ok(&rg, &s);
    ck_assert_int_le(k.peak_bytes, 2100);
    ck_assert_double_eq(k.recompute_cost, 1);
    for (int32_t e = 0; e < s.n; e++) {
        if (s.node[e] == up) break;
        if (s.recompute[e]) ck_assert_int_eq(s.node[e], f1);
    }
    mp_rsched_free(&s);
    mp_rplan_free(&p);
    mp_rspace_free(&sp);
    mp_rgraph_free(&rg);
}
END_TEST

/* Where LRU thrashes and Belady does not. a, b, c (100 each) are remade from
 * the resident x at cost 1; the backward reads them in turn twice (g_i, 1
 * byte, chains the reads) and a budget of 205 holds two of them. Greedy evicts
 * the stalest, which is the next one read: the forward evicts a, and each of
 * b1..b5 brings back its value and evicts the one read next (until a dies
 * after b4), 5 recomputations. Lookahead evicts the one read last: b after
 * the forward, a at b2 (needed at b4, c at b3), c at b4; 3 recomputations. */
START_TEST(test_lookahead_cyclic_reads)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t x = tg_value(&rg, 0), v[3], g = -1;
    for (int i = 0; i < 3; i++) {
        v[i] = tg_value(&rg, 100);
        tg_node(&rg, (const char *[]){"fa", "fb", "fc"}[i], 1, true, 1, &x, 1, &v[i]);
    }
    for (int i = 0; i < 6; i++) {
        int32_t ng = tg_value(&rg, 1);
        tg_node(&rg, (const char *[]){"b1", "b2", "b3", "b4", "b5", "b6"}[i], 1, false, g < 0 ? 1 : 2,
                (int32_t[]){v[i % 3], g}, 1, &ng);
        g = ng;
    }
    rg.keep_to_end[g] = 1;
    mp_rcount gr = baseline(&rg, MP_RBASE_GREEDY, 205), la = baseline(&rg, MP_RBASE_LOOKAHEAD, 205);
    ck_assert_int_le(gr.peak_bytes, 205);
    ck_assert_int_le(la.peak_bytes, 205);
    ck_assert_double_eq(gr.recompute_cost, 5);
    ck_assert_double_eq(la.recompute_cost, 3);
    mp_rgraph_free(&rg);
}
END_TEST

/* A mask (4 bytes) made first and read by every f_i crosses every cut; kept
 * like a resident value, it leaves the articulation values as they were. */
START_TEST(test_baselines_shared_mask)
{
    mp_rgraph plain, masked;
    block_chain(&plain, 25, 1000, 10);
    tg_init(&masked);
    int32_t x = tg_value(&masked, 10), m = tg_value(&masked, 4);
    tg_node(&masked, "mask", 1, true, 1, &x, 1, &m);
    for (int32_t u = 0; u < plain.nnodes; u++) { /* plain's nodes (its value v > 0 is masked's v + 1), f_i reading m */
        int32_t nin = plain.in_off[u + 1] - plain.in_off[u], in[MAXE], out = tg_value(&masked, 0);
        masked.bytes[out] = plain.bytes[plain.out[plain.out_off[u]]];
        for (int k = 0; k < nin; k++) in[k] = plain.in[plain.in_off[u] + k] ? plain.in[plain.in_off[u] + k] + 1 : x;
        if (plain.node_name[u][0] == 'f') in[nin++] = m;
        tg_node(&masked, plain.node_name[u], plain.cost[u], plain.recomputable[u], nin, in, 1, &out);
        masked.keep_to_end[out] = plain.keep_to_end[plain.out[plain.out_off[u]]];
    }
    mp_rcount a = baseline(&plain, MP_RBASE_ALL, 0), b = baseline(&masked, MP_RBASE_ALL, 0);
    ck_assert_int_le(b.peak_bytes, a.peak_bytes + 4);
    ck_assert_double_eq(b.recompute_cost, a.recompute_cost);
    ck_assert_int_lt(b.peak_bytes, baseline(&masked, MP_RBASE_NONE, 0).peak_bytes / 2);
    mp_rgraph_free(&plain);
    mp_rgraph_free(&masked);
}
END_TEST

/* With blocks of equal sizes the sqrt segments are cheaper in memory than
 * keeping every articulation value. */
START_TEST(test_baselines_sqrt_memory)
{
    mp_rgraph rg;
    block_chain(&rg, 64, 100, 100);
    mp_rcount none = baseline(&rg, MP_RBASE_NONE, 0), all = baseline(&rg, MP_RBASE_ALL, 0),
              sq = baseline(&rg, MP_RBASE_SQRT, 0);
    ck_assert_int_lt(sq.peak_bytes, all.peak_bytes);
    ck_assert_int_lt(all.peak_bytes, none.peak_bytes);
    ck_assert_double_gt(sq.recompute_cost, all.recompute_cost);
    mp_rgraph_free(&rg);
}
END_TEST

START_TEST(test_baselines_random)
{
    int fits = 0;
    for (uint32_t seed = 1; seed <= 20; seed++) {
        mp_rgraph rg;
        random_training(&rg, 10 + (int)(seed * 13 % 90), seed);
        mp_rcount none = baseline(&rg, MP_RBASE_NONE, 0);
        baseline(&rg, MP_RBASE_ALL, 0);
        baseline(&rg, MP_RBASE_SQRT, 0);
        for (int f = 5; f <= 10; f++)
            for (int b = MP_RBASE_GREEDY; b <= MP_RBASE_LOOKAHEAD; b++) {
                int64_t budget = none.peak_bytes * f / 10;
                mp_err err = {{0}};
                mp_rsched s;
                if (mp_remat_baseline(&rg, b, budget, &s, &err) == 0) {
                    mp_rsched_free(&s);
                    ck_assert_int_le(baseline(&rg, b, budget).peak_bytes, budget);
                    fits++;
                } else {
                    ck_assert_msg(strstr(err.msg, ": a budget of") && strstr(err.msg, mp_rbaseline_names[b]), "%s",
                                  err.msg);
                    ck_assert_int_lt(f, 10); /* the store-everything peak always fits */
                }
            }
        mp_rgraph_free(&rg);
    }
    ck_assert_int_gt(fits, 200); /* of 240, down to half the store-everything peak */
}
END_TEST

/* No forward nodes, a single node, nothing at all: every baseline copes. */
START_TEST(test_baselines_odd_graphs)
{
    for (int shape = 0; shape < 4; shape++) {
        mp_rgraph rg;
        tg_init(&rg);
        int32_t x = tg_value(&rg, 5);
        if (shape == 1) {
            int32_t a = tg_value(&rg, 3), b = tg_value(&rg, 4);
            tg_node(&rg, "b0", 1, false, 1, &x, 1, &a);
            tg_node(&rg, "b1", 1, false, 2, (int32_t[]){a, x}, 1, &b);
        } else if (shape == 2) {
            int32_t a = tg_value(&rg, 3);
            tg_node(&rg, "f0", 1, true, 1, &x, 1, &a);
        } else if (shape == 3) { /* two forward branches: no articulation value */
            int32_t a = tg_value(&rg, 3), b = tg_value(&rg, 4), c = tg_value(&rg, 1), d = tg_value(&rg, 2);
            tg_node(&rg, "f0", 1, true, 1, &x, 1, &a);
            tg_node(&rg, "f1", 1, true, 1, &x, 1, &b);
            tg_node(&rg, "f2", 1, true, 2, (int32_t[]){a, b}, 1, &c);
            tg_node(&rg, "b0", 1, false, 3, (int32_t[]){a, b, c}, 1, &d);
        }
        int64_t peak = count_identity(&rg).peak_bytes;
        for (int b = 0; b < MP_RBASE_COUNT; b++) ck_assert_int_le(baseline(&rg, b, peak).peak_bytes, peak);
        mp_rgraph_free(&rg);
    }
}
END_TEST

/* Calls each on every Checkmate training graph of ../shared/remat-graphs and
 * checks there were six at least; says so and does nothing when the folder
 * is absent. */
static void for_checkmate_graphs(const char *test, void (*each)(const mp_rgraph *rg, const char *name))
{
    const char *dir = MEMPLAN_SHARED "/remat-graphs";
    DIR *d = opendir(dir);
    if (!d) {
        printf("%s: %s is absent, Checkmate's graphs skipped\n", test, dir);
        return;
    }
    int graphs = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, "_train_nx.json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mp_rgraph rg;
        mp_err err = {{0}};
        ck_assert_msg(mp_rgraph_from_json(path, &rg, &err) == 0, "%s: %s", path, err.msg);
        each(&rg, e->d_name);
        mp_rgraph_free(&rg);
        graphs++;
    }
    closedir(d);
    ck_assert_int_ge(graphs, 6);
}

/* Every baseline's order counts, and greedy and lookahead either fit 0.9 of
 * the store-everything peak or say why not. */
static void check_baselines(const mp_rgraph *rg, const char *name)
{
    mp_err err = {{0}};
    mp_rcount none = baseline(rg, MP_RBASE_NONE, 0), sq = baseline(rg, MP_RBASE_SQRT, 0);
    mp_rcount all = baseline(rg, MP_RBASE_ALL, 0);
    ck_assert_msg(sq.peak_bytes <= none.peak_bytes && all.peak_bytes <= none.peak_bytes, "%s", name);
    ck_assert_double_ge(sq.recompute_cost, all.recompute_cost); /* sqrt keeps a subset of all's checkpoints */
    int64_t budget = none.peak_bytes / 10 * 9;
    for (int b = MP_RBASE_GREEDY; b <= MP_RBASE_LOOKAHEAD; b++) {
        mp_rsched s;
        if (mp_remat_baseline(rg, b, budget, &s, &err) == 0) {
            ck_assert_int_le(count_ok(rg, &s).peak_bytes, budget);
            mp_rsched_free(&s);
        } else {
            ck_assert_msg(strstr(err.msg, ": a budget of"), "%s: %s", name, err.msg);
        }
    }
}

START_TEST(test_baselines_checkmate)
{
    for_checkmate_graphs("test_baselines_checkmate", check_baselines);
}
END_TEST

/* ---- pruning (remat_prune.c) ---------------------------------------------------- */

/* Prunes the baseline's order for budget and checks what mp_rsched_prune
 * promises: the order still runs within the budget, costs no more (less by
 * exactly the recomputations removed), keeps every node's first run and the
 * order of what stays, and reruns only what the baseline reran. Returns the
 * recomputations removed; -1 when the baseline does not fit. */
static int prune_checked(const mp_rgraph *rg, mp_rbaseline b, int64_t budget)
{
    mp_err err = {{0}};
    mp_rsched s, before;
    if (mp_remat_baseline(rg, b, budget, &s, &err)) return -1;
    mp_rcount c0 = count_ok(rg, &s);
    if (c0.peak_bytes > budget) {
        mp_rsched_free(&s);
        return -1;
    }
    ck_assert(!mp_remat_baseline(rg, b, budget, &before, &err));
    int32_t removed = -1;
    ck_assert_msg(mp_rsched_prune(rg, &s, budget, &removed, &err) == 0, "%s", err.msg);
    mp_rcount c1 = count_ok(rg, &s);
    ck_assert_int_le(c1.peak_bytes, budget);
    ck_assert_int_eq(s.n + removed, before.n);
    double gone = 0;
    int32_t k = 0; /* s is a subsequence of before, dropping recomputations only */
    for (int32_t e = 0; e < before.n; e++) {
        if (k < s.n && s.node[k] == before.node[e] && s.recompute[k] == before.recompute[e]) {
            k++;
            continue;
        }
        ck_assert_msg(before.recompute[e], "entry %d, a first run of '%s', was removed", e,
                      rg->node_name[before.node[e]]);
        gone += rg->cost[before.node[e]];
    }
    ck_assert_int_eq(k, s.n);
    ck_assert(fabs(c0.recompute_cost - gone - c1.recompute_cost) <= 1e-9 * (1 + c0.recompute_cost));
    mp_rsched_free(&s);
    mp_rsched_free(&before);
    return removed;
}

/* all's order on the block chain recomputes a_1..a_24 whatever the budget:
 * at the store-everything peak every recomputation goes, at all's own peak
 * not all, and in between more budget lets more go. */
START_TEST(test_prune_block_chain)
{
    mp_rgraph rg;
    block_chain(&rg, 25, 1000, 10);
    mp_rcount none = baseline(&rg, MP_RBASE_NONE, 0), all = baseline(&rg, MP_RBASE_ALL, 0);
    ck_assert_int_eq(prune_checked(&rg, MP_RBASE_ALL, none.peak_bytes), 24);
    ck_assert_int_lt(prune_checked(&rg, MP_RBASE_ALL, all.peak_bytes), 24);
    int last = 0;
    for (int k = 1; k <= 24; k++) {
        int removed = prune_checked(&rg, MP_RBASE_ALL, all.peak_bytes + k * 1000);
        ck_assert_int_ge(removed, last);
        ck_assert_int_le(removed, 24);
        last = removed;
    }
    ck_assert_int_ge(prune_checked(&rg, MP_RBASE_ALL, all.peak_bytes + 3000), 2);
    mp_rgraph_free(&rg);
}
END_TEST

/* x(10, resident); f0: a(100) = f(x); f1: c(100) = f(a); f2: d(100) = f(c);
 * f3: e(10) = f(d); b3: g3(10) = f(e, d); b2: g2(10) = f(g3, c); b1: g1
 * (kept) = f(g2, x), and the order f0 f1 f2 f3 b3 [f0 f1] b2 b1. */
static mp_rsched unread_chain(mp_rgraph *rg)
{
    tg_init(rg);
    int32_t x = tg_value(rg, 10), a = tg_value(rg, 100), c = tg_value(rg, 100), d = tg_value(rg, 100);
    int32_t e = tg_value(rg, 10), g3 = tg_value(rg, 10), g2 = tg_value(rg, 10), g1 = tg_value(rg, 10);
    rg->keep_to_end[g1] = 1;
    tg_node(rg, "f0", 1, true, 1, &x, 1, &a);
    tg_node(rg, "f1", 5, true, 1, &a, 1, &c);
    tg_node(rg, "f2", 1, true, 1, &c, 1, &d);
    tg_node(rg, "f3", 1, true, 1, &d, 1, &e);
    tg_node(rg, "b3", 1, false, 2, (int32_t[]){e, d}, 1, &g3);
    tg_node(rg, "b2", 1, false, 2, (int32_t[]){g3, c}, 1, &g2);
    tg_node(rg, "b1", 1, false, 2, (int32_t[]){g2, x}, 1, &g1);
    return order_of(9, (const int32_t[]){0, 1, 2, 3, 4, ~0, ~1, 5, 6});
}

/* unread_chain's order brings c back for b2 (peak 220, at c's rerun); a's
 * rerun only feeds c's. Keeping c instead peaks at 230 (b3: x, c, d, e, g3),
 * so at 230 c's rerun goes, and a's with it, unread; at 220 neither can
 * (keeping a instead peaks at 310, f2). */
START_TEST(test_prune_unread_chain)
{
    mp_rgraph rg;
    mp_rsched s = unread_chain(&rg);
    mp_rcount c0 = count_ok(&rg, &s);
    ck_assert_int_eq(c0.peak_bytes, 220);
    ck_assert_double_eq(c0.recompute_cost, 6);
    mp_err err = {{0}};
    int32_t removed = -1;
    ck_assert(!mp_rsched_prune(&rg, &s, 220, &removed, &err));
    ck_assert_int_eq(removed, 0);
    ck_assert_int_eq(s.n, 9);
    ck_assert(!mp_rsched_prune(&rg, &s, 230, &removed, &err));
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(s.n, 7);
    mp_rcount c1 = count_ok(&rg, &s);
    ck_assert_int_eq(c1.peak_bytes, 230);
    ck_assert_double_eq(c1.recompute_cost, 0);
    mp_rsched_free(&s);
    /* an order above the budget is left as it is */
    mp_rgraph_free(&rg);
    s = unread_chain(&rg);
    ck_assert(!mp_rsched_prune(&rg, &s, 200, &removed, &err));
    ck_assert_int_eq(removed, 0);
    ck_assert_int_eq(s.n, 9);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* unread_chain at 230: told to stop before it starts, the pruner removes
 * nothing (both reruns are read) and the order is the one given; not told,
 * it removes both. */
START_TEST(test_prune_until_stopped)
{
    mp_rgraph rg;
    mp_err err = {{0}};
    int32_t removed = -1;
    atomic_bool stop;
    atomic_init(&stop, true);
    mp_rsched s = unread_chain(&rg);
    ck_assert(!mp_rsched_prune_with(&rg, &s, 230, &(mp_prune_opts){.stop = &stop}, &removed, &err));
    ck_assert_int_eq(removed, 0);
    ck_assert_int_eq(s.n, 9);
    ck_assert_double_eq(count_ok(&rg, &s).recompute_cost, 6);
    mp_rsched_free(&s);
    atomic_store(&stop, false);
    mp_rgraph_free(&rg);
    s = unread_chain(&rg);
    ck_assert(!mp_rsched_prune_with(&rg, &s, 230, &(mp_prune_opts){.stop = &stop}, &removed, &err));
    ck_assert_int_eq(removed, 2);
    ck_assert_double_eq(count_ok(&rg, &s).recompute_cost, 0);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* x(10, resident); fA: A(100), fB: B(50), fC: C(50) = f(x), each rerun
 * (costs 5, 3, 3) for its backward node after a middle m1: M(200) = f(x),
 * m2: N(10) = f(M) that peaks at 220. Keeping A instead of its rerun adds
 * 100 there, B or C 50. Within 320, removing the costliest rerun first (A)
 * leaves no room for the others (6 kept); removals that raise the peak
 * little first take B's and C's (5 kept), the cheaper. */
START_TEST(test_prune_small_raises_first)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t x = tg_value(&rg, 10), a = tg_value(&rg, 100), b = tg_value(&rg, 50), c = tg_value(&rg, 50);
    int32_t m = tg_value(&rg, 200), nn = tg_value(&rg, 10), ga = tg_value(&rg, 10), gb = tg_value(&rg, 10),
            gc = tg_value(&rg, 10);
    rg.keep_to_end[gc] = 1;
    tg_node(&rg, "fA", 5, true, 1, &x, 1, &a);
    tg_node(&rg, "fB", 3, true, 1, &x, 1, &b);
    tg_node(&rg, "fC", 3, true, 1, &x, 1, &c);
    tg_node(&rg, "m1", 1, true, 1, &x, 1, &m);
    tg_node(&rg, "m2", 1, true, 1, &m, 1, &nn);
    tg_node(&rg, "bA", 1, false, 2, (int32_t[]){a, nn}, 1, &ga);
    tg_node(&rg, "bB", 1, false, 2, (int32_t[]){b, ga}, 1, &gb);
    tg_node(&rg, "bC", 1, false, 2, (int32_t[]){c, gb}, 1, &gc);
    const int32_t given[] = {0, 1, 2, 3, 4, ~0, 5, ~1, 6, ~2, 7};
    mp_rsched s = order_of(11, given);
    mp_rcount c0 = count_ok(&rg, &s);
    ck_assert_int_eq(c0.peak_bytes, 220);
    ck_assert_double_eq(c0.recompute_cost, 11);
    mp_err err = {{0}};
    int32_t removed = -1;
    ck_assert(!mp_rsched_prune(&rg, &s, 320, &removed, &err));
    mp_rcount c1 = count_ok(&rg, &s);
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(c1.peak_bytes, 320);
    ck_assert_double_eq(c1.recompute_cost, 5);
    mp_rsched_free(&s);
    /* with room for A's and one more, the costliest first is the cheaper: A's and B's go (3 kept) */
    s = order_of(11, given);
    ck_assert(!mp_rsched_prune(&rg, &s, 370, &removed, &err));
    ck_assert_double_eq(count_ok(&rg, &s).recompute_cost, 3);
    mp_rsched_free(&s);
    mp_rgraph_free(&rg);
}
END_TEST

/* Every baseline's order on random training graphs and on Checkmate's, at
 * 0.5 .. 1.0 of the store-everything peak: the promises of prune_checked
 * hold, and all's and sqrt's orders lose recomputations where the budget has
 * room. */
START_TEST(test_prune_random)
{
    int orders = 0, pruned = 0;
    for (uint32_t seed = 1; seed <= 20; seed++) {
        mp_rgraph rg;
        random_training(&rg, 10 + (int)(seed * 13 % 90), seed);
        mp_rcount none = baseline(&rg, MP_RBASE_NONE, 0);
        for (int f = 5; f <= 10; f++)
            for (int b = MP_RBASE_ALL; b < MP_RBASE_COUNT; b++) {
                int removed = prune_checked(&rg, (mp_rbaseline)b, none.peak_bytes * f / 10);
                orders += removed >= 0;
                pruned += removed > 0;
            }
        mp_rgraph_free(&rg);
    }
    ck_assert_int_gt(orders, 150);
    ck_assert_int_gt(pruned, 50);
}
END_TEST

/* x(10, resident); f0: A(100) = f(x); f1: B(100) = f(A); z: Z(300) = f(x),
 * read by none; m1: M(100) = f(x); b1: G(10, kept) = f(B, M). The order
 * f0 f1 z m1 [f1] b1 peaks at z (x, A, Z: 410); it reruns f1 for b1, which
 * keeps A alive to the rerun. Without the rerun B lives from f1 on, and A
 * dies after f1, its last reader now, so z counts B for A: 410 still, and
 * the rerun goes within 410. */
START_TEST(test_prune_input_dies_sooner)
{
    mp_rgraph rg;
    tg_init(&rg);
    int32_t x = tg_value(&rg, 10), a = tg_value(&rg, 100), b = tg_value(&rg, 100), z = tg_value(&rg, 300);
    int32_t m = tg_value(&rg, 100), g = tg_value(&rg, 10);
    rg.keep_to_end[g] = 1;
    tg_node(&rg, "f0", 1, true, 1, &x, 1, &a);
    tg_node(&rg, "f1", 1, true, 1, &a, 1, &b);
    tg_node(&rg, "z", 1, true, 1, &x, 1, &z);
    tg_node(&rg, "m1", 1, true, 1, &x, 1, &m);
    tg_node(&rg, "b1", 1, false, 2, (int32_t[]){b, m}, 1, &g);
    const int32_t given[] = {0, 1, 2, 3, ~1, 4};
    mp_err err = {{0}};
    for (int way = 0; way < 2; way++) { /* by lifetimes, and recounted */
        mp_rsched s = order_of(6, given);
        ck_assert_int_eq(count_ok(&rg, &s).peak_bytes, 410);
        int32_t removed = -1;
        ck_assert(!mp_rsched_prune_with(&rg, &s, 410, &(mp_prune_opts){.recount_each = way}, &removed, &err));
        ck_assert_int_eq(removed, 1);
        mp_rcount c = count_ok(&rg, &s);
        ck_assert_int_eq(c.peak_bytes, 410);
        ck_assert_double_eq(c.recompute_cost, 0);
        mp_rsched_free(&s);
    }
    mp_rgraph_free(&rg);
}
END_TEST

/* Prunes b's order for budget both ways, by the lifetimes each removal
 * changes and by recounting the whole order each time, and checks that the
 * two give the same order. Returns the entries removed; -1 when the
 * baseline does not fit. */
static int prune_both_ways(const mp_rgraph *rg, mp_rbaseline b, int64_t budget)
{
    mp_err err = {{0}};
    mp_rsched fast, slow;
    if (mp_remat_baseline(rg, b, budget, &fast, &err)) return -1;
    if (count_ok(rg, &fast).peak_bytes > budget) {
        mp_rsched_free(&fast);
        return -1;
    }
    ck_assert(!mp_remat_baseline(rg, b, budget, &slow, &err));
    int32_t removed_fast = -1, removed_slow = -2;
    ck_assert_msg(!mp_rsched_prune_with(rg, &fast, budget, NULL, &removed_fast, &err), "%s", err.msg);
    ck_assert_msg(!mp_rsched_prune_with(rg, &slow, budget, &(mp_prune_opts){.recount_each = true}, &removed_slow,
                                        &err), "%s", err.msg);
    ck_assert_int_eq(removed_fast, removed_slow);
    ck_assert_int_eq(fast.n, slow.n);
    ck_assert(!memcmp(fast.node, slow.node, (size_t)fast.n * sizeof *fast.node));
    ck_assert(!memcmp(fast.recompute, slow.recompute, (size_t)fast.n));
    mp_rsched_free(&fast);
    mp_rsched_free(&slow);
    return removed_fast;
}

/* prune_both_ways on a Checkmate graph at 0.5 .. 0.9 of its peak. */
static void prune_both_ways_checkmate(const mp_rgraph *rg, const char *name)
{
    (void)name;
    mp_rcount none = baseline(rg, MP_RBASE_NONE, 0);
    for (int f = 5; f <= 9; f++)
        for (int b = MP_RBASE_ALL; b < MP_RBASE_COUNT; b++) prune_both_ways(rg, (mp_rbaseline)b, none.peak_bytes * f / 10);
}

/* The pruner's check by lifetimes against its reference, the recount of the
 * whole order per trial: the same orders on random training graphs (some
 * with forward values kept to the end, which a new instance replaces) at
 * 0.40 .. 1.00 of the store-everything peak, and on Checkmate's graphs. */
START_TEST(test_prune_lifetimes_match_recount)
{
    int orders = 0, pruned = 0;
    for (uint32_t seed = 1; seed <= 40; seed++) {
        mp_rgraph rg;
        random_training(&rg, 10 + (int)(seed * 17 % 110), seed);
        if (seed % 2) /* forward values kept to the end too */
            for (int32_t v = 0; v < rg.nvalues; v++) rg.keep_to_end[v] |= rg.producer[v] >= 0 && v % 7 == 3;
        mp_rcount none = baseline(&rg, MP_RBASE_NONE, 0);
        for (int f = 40; f <= 100; f += 4)
            for (int b = MP_RBASE_ALL; b < MP_RBASE_COUNT; b++) {
                int removed = prune_both_ways(&rg, (mp_rbaseline)b, none.peak_bytes * f / 100);
                orders += removed >= 0;
                pruned += removed > 0;
            }
        mp_rgraph_free(&rg);
    }
    ck_assert_int_gt(orders, 1000);
    ck_assert_int_gt(pruned, 400);
    for_checkmate_graphs("test_prune_lifetimes_match_recount", prune_both_ways_checkmate);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remat_count");
    TCase *t = tcase_create("recount");
    tcase_add_test(t, test_chain);
    tcase_add_test(t, test_diamond);
    tcase_add_test(t, test_multi_output);
    tcase_add_test(t, test_recompute_frees_original);
    tcase_add_test(t, test_replace_keep_to_end);
    tcase_add_test(t, test_rejects_bad_orders);
    tcase_add_test(t, test_identity_matches_naive);
    tcase_add_test(t, test_recount_matches_naive);
    tcase_add_test(t, test_write_json);
    suite_add_tcase(s, t);
    t = tcase_create("baselines");
    tcase_add_test(t, test_baselines_block_chain);
    tcase_add_test(t, test_baselines_sqrt_memory);
    tcase_add_test(t, test_baselines_shared_mask);
    tcase_add_test(t, test_greedy_keeps_pinned_inputs);
    tcase_add_test(t, test_in_place_write_blocks_rerun);
    tcase_add_test(t, test_lookahead_cyclic_reads);
    tcase_add_test(t, test_baselines_random);
    tcase_add_test(t, test_baselines_odd_graphs);
    tcase_add_test(t, test_baselines_checkmate);
    suite_add_tcase(s, t);
    t = tcase_create("prune");
    tcase_add_test(t, test_prune_block_chain);
    tcase_add_test(t, test_prune_unread_chain);
    tcase_add_test(t, test_prune_small_raises_first);
    tcase_add_test(t, test_prune_until_stopped);
    tcase_add_test(t, test_prune_input_dies_sooner);
    tcase_add_test(t, test_prune_lifetimes_match_recount);
    tcase_add_test(t, test_prune_random);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
