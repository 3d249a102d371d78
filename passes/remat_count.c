/* remat_count.c - orders of an rgraph and their recount, the referee of every
 * plan. Checkmate's semantics: an entry needs the latest instance of each
 * input alive, allocates its outputs as new instances (replacing an alive old
 * one), and an instance is freed after its last use before the next
 * computation of its value. Two passes over the order: a backward scan finds
 * each instance's last use, a forward scan counts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passes/remat.h"

static bool flag(const uint8_t *a, int32_t i) { return a && a[i]; }

static const char *node_label(const mp_rgraph *rg, int32_t u)
{
    return rg->node_name && rg->node_name[u] ? rg->node_name[u] : "?";
}

void mp_rsched_free(mp_rsched *s)
{
    if (!s) return;
    free(s->node);
    free(s->recompute);
    memset(s, 0, sizeof *s);
}

int mp_rsched_identity(const mp_rgraph *rg, mp_rsched *s, mp_err *err)
{
    memset(s, 0, sizeof *s);
    if (!rg || rg->nnodes < 0) return mp_fail(err, "store-everything order: no graph");
    size_t n = (size_t)rg->nnodes;
    s->node = malloc((n ? n : 1) * sizeof *s->node);
    s->recompute = calloc(n ? n : 1, 1);
    if (!s->node || !s->recompute) {
        mp_rsched_free(s);
        return mp_fail(err, "out of memory for an order of %zu entries", n);
    }
    for (size_t i = 0; i < n; i++) s->node[i] = (int32_t)i;
    s->n = (int32_t)n;
    return 0;
}

/* ---- checks: a malformed graph or order fails with a message, never crashes ---- */

static int check_csr(const mp_rgraph *rg, const int32_t *off, const int32_t *ids, const char *what, mp_err *err)
{
    if (!off || off[0] != 0) return mp_fail(err, "remat graph: the %s offsets are missing or do not start at 0", what);
    for (int32_t i = 0; i < rg->nnodes; i++) {
        if (off[i + 1] < off[i]) return mp_fail(err, "remat graph: the %s offsets decrease at node '%s'", what,
                                                node_label(rg, i));
        for (int32_t k = off[i]; k < off[i + 1]; k++)
            if (!ids || ids[k] < 0 || ids[k] >= rg->nvalues)
                return mp_fail(err, "remat graph: node '%s' has %s value %d, outside 0..%d", node_label(rg, i), what,
                               ids ? ids[k] : -1, rg->nvalues - 1);
    }
    return 0;
}

static int check_graph(const mp_rgraph *rg, mp_err *err)
{
    if (!rg || rg->nnodes < 0 || rg->nvalues < 0) return mp_fail(err, "remat graph: negative sizes");
    if (rg->nvalues > 0 && (!rg->bytes || !rg->producer)) return mp_fail(err, "remat graph: value arrays missing");
    if (check_csr(rg, rg->in_off, rg->in, "input", err) || check_csr(rg, rg->out_off, rg->out, "output", err))
        return -1;
    for (int32_t v = 0; v < rg->nvalues; v++) {
        if (rg->bytes[v] < 0) return mp_fail(err, "remat graph: value %d has %lld bytes", v, (long long)rg->bytes[v]);
        if (rg->producer[v] < -1 || rg->producer[v] >= rg->nnodes)
            return mp_fail(err, "remat graph: value %d has producer %d, outside -1..%d", v, rg->producer[v],
                           rg->nnodes - 1);
    }
    for (int32_t u = 0; u < rg->nnodes; u++)
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
            int32_t v = rg->out[k];
            if (rg->producer[v] != u)
                return mp_fail(err, "remat graph: node '%s' outputs value %d, whose producer is %d", node_label(rg, u),
                               v, rg->producer[v]);
            for (int32_t j = rg->out_off[u]; j < k; j++)
                if (rg->out[j] == v) return mp_fail(err, "remat graph: node '%s' outputs value %d twice",
                                                    node_label(rg, u), v);
        }
    return 0;
}

static int check_sched(const mp_rgraph *rg, const mp_rsched *s, mp_err *err)
{
    if (!s || s->n < 0 || (s->n > 0 && !s->node)) return mp_fail(err, "remat order: no entries");
    for (int32_t e = 0; e < s->n; e++)
        if (s->node[e] < 0 || s->node[e] >= rg->nnodes)
            return mp_fail(err, "remat order: entry %d runs node %d, outside 0..%d", e, s->node[e], rg->nnodes - 1);
    return 0;
}

/* ---- the recount ---- */

static int add_bytes(int64_t *sum, int64_t b, mp_err *err)
{
    if (!mp_add_ok(*sum, b, sum)) return mp_fail(err, "remat recount: live bytes overflow 64 bits");
    return 0;
}

/* Counts s; live (n values, or NULL) gets the bytes alive at each entry. O(entries + their inputs and outputs).
 * graph_checked: rg passed check_graph already (the pruner recounts one graph thousands of times); the count
 * stops once the live bytes pass stop_above (its peak_bytes is then above it, the rest partial). */
static int recount(const mp_rgraph *rg, const mp_rsched *s, mp_rcount *c, int64_t *live, bool graph_checked,
                   int64_t stop_above, mp_err *err)
{
    if ((!graph_checked && check_graph(rg, err)) || check_sched(rg, s, err)) return -1;
    memset(c, 0, sizeof *c);
    c->peak_entry = -1;
    const int32_t *io = rg->in_off, *oo = rg->out_off;
    int64_t nslots = 0; /* output instances the order allocates */
    for (int32_t e = 0; e < s->n; e++) nslots += oo[s->node[e] + 1] - oo[s->node[e]];
    size_t nv = (size_t)rg->nvalues + 1;
    int32_t *last = malloc(nv * sizeof *last);         /* backward scan: latest use of the instance after */
    int32_t *die = malloc(nv * sizeof *die);           /* forward scan: last use of the alive instance, -1 none */
    int32_t *born = malloc(nv * sizeof *born);         /* entry that made the alive instance */
    uint8_t *alive = calloc(nv, 1);
    int32_t *slot_last = malloc((size_t)(nslots + 1) * sizeof *slot_last); /* per output instance */
    int rc = -1;
    if (!last || !die || !born || !alive || !slot_last) {
        mp_fail(err, "remat recount: out of memory");
        goto done;
    }

    /* pass 1, backward: an instance's last use is the latest read before its value is computed again */
    for (int32_t v = 0; v < rg->nvalues; v++) last[v] = -1;
    int64_t slot = nslots;
    for (int32_t e = s->n - 1; e >= 0; e--) {
        int32_t u = s->node[e];
        slot -= oo[u + 1] - oo[u];
        for (int32_t k = oo[u]; k < oo[u + 1]; k++) {
            slot_last[slot + (k - oo[u])] = last[rg->out[k]];
            last[rg->out[k]] = -1; /* reads before e belong to the previous instance */
        }
        for (int32_t k = io[u]; k < io[u + 1]; k++)
            if (last[rg->in[k]] < 0) last[rg->in[k]] = e;
    }

    /* pass 2, forward: resident values throughout, plus every alive instance */
    int64_t cur = 0;
    for (int32_t v = 0; v < rg->nvalues; v++)
        if (rg->producer[v] < 0 && add_bytes(&cur, rg->bytes[v], err)) goto done;
    c->peak_bytes = cur;
    int32_t next = 0; /* the steps before it have run */
    for (int32_t e = 0; e < s->n; e++) {
        int32_t u = s->node[e];
        bool again = s->recompute && s->recompute[e];
        for (int32_t k = io[u]; k < io[u + 1]; k++) {
            int32_t v = rg->in[k], w;
            if (rg->producer[v] >= 0 && !alive[v]) { /* frees follow last uses: it never ran before e */
                mp_fail(err, "remat order: entry %d (node '%s') reads value %d (output of '%s'), which is not computed "
                        "before it", e, node_label(rg, u), v, node_label(rg, rg->producer[v]));
                goto done;
            }
            if (again && (w = mp_rgraph_next_write(rg, v, u)) < next) { /* it would read what w wrote there */
                mp_fail(err, "remat order: entry %d runs node '%s' again after node '%s' overwrote its input %d in "
                        "place", e, node_label(rg, u), node_label(rg, w), v);
                goto done;
            }
        }
        if (!again && u >= next) next = u + 1;
        for (int32_t k = oo[u]; k < oo[u + 1]; k++) {
            int32_t v = rg->out[k];
            if (alive[v]) cur -= rg->bytes[v]; /* the new instance replaces the old one */
            if (add_bytes(&cur, rg->bytes[v], err)) goto done;
            alive[v] = 1;
            born[v] = e;
            die[v] = slot_last[slot++];
        }
        if (live) live[e] = cur;
        if (c->peak_entry < 0 || cur > c->peak_bytes) {
            c->peak_bytes = cur;
            c->peak_entry = e;
            if (cur > stop_above) break;
        }
        double cost = rg->cost ? rg->cost[u] : 0;
        c->cost += cost;
        if (s->recompute && s->recompute[e]) c->recompute_cost += cost;
        /* free what this entry used last; keep_to_end values stay to the end */
        for (int32_t k = io[u]; k < io[u + 1]; k++) {
            int32_t v = rg->in[k];
            if (rg->producer[v] >= 0 && alive[v] && born[v] != e && die[v] == e && !flag(rg->keep_to_end, v)) {
                alive[v] = 0;
                cur -= rg->bytes[v];
            }
        }
        for (int32_t k = oo[u]; k < oo[u + 1]; k++) {
            int32_t v = rg->out[k];
            if (die[v] < 0 && !flag(rg->keep_to_end, v)) {
                alive[v] = 0;
                cur -= rg->bytes[v];
            }
        }
    }
    rc = 0;
done:
    free(last);
    free(die);
    free(born);
    free(alive);
    free(slot_last);
    return rc;
}

int mp_rsched_count(const mp_rgraph *rg, const mp_rsched *s, mp_rcount *c, mp_err *err)
{
    return recount(rg, s, c, NULL, false, INT64_MAX, err);
}

int mp_rsched_recount(const mp_rgraph *rg, const mp_rsched *s, int64_t stop_above, mp_rcount *c, mp_err *err)
{
    return recount(rg, s, c, NULL, true, stop_above, err);
}

/* live[e]: the bytes alive while entry e runs, its inputs and new outputs
 * included (before its frees), so the largest is the peak. */
int mp_rsched_profile(const mp_rgraph *rg, const mp_rsched *s, int64_t *live, mp_err *err)
{
    mp_rcount c;
    if (!live && s && s->n > 0) return mp_fail(err, "remat profile: no output array");
    return recount(rg, s, &c, live, false, INT64_MAX, err);
}

/* ---- the --schedule file ---- */

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] < 0xC2 ? 0 : p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : p[0] < 0xF5 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    /* overlong 3- and 4-byte forms, surrogates and code points past U+10FFFF */
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) || (p[0] == 0xF0 && p[1] < 0x90) ||
        (p[0] == 0xF4 && p[1] > 0x8F))
        return 0;
    return len;
}

/* A JSON string literal: quotes, backslashes and control characters escaped, invalid UTF-8 as U+FFFD. */
static void write_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char ch = p[i];
        if (ch == '"' || ch == '\\') {
            fputc('\\', f);
            fputc(ch, f);
            i++;
        } else if (ch < 0x20) {
            const char *short_esc = ch == '\n' ? "\\n" : ch == '\t' ? "\\t" : ch == '\r' ? "\\r" : NULL;
            if (short_esc) fputs(short_esc, f);
            else fprintf(f, "\\u%04x", ch);
            i++;
        } else if (ch < 0x80) {
            fputc(ch, f);
            i++;
        } else {
            size_t len = utf8_len(p + i, n - i);
            if (len) fwrite(p + i, 1, len, f);
            else fputs("\xEF\xBF\xBD", f);
            i += len ? len : 1;
        }
    }
    fputc('"', f);
}

int mp_rsched_write_json(const mp_rgraph *rg, const mp_rsched *s, const char *path, mp_err *err)
{
    if (check_graph(rg, err) || check_sched(rg, s, err)) return -1;
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) return mp_fail(err, "out of memory");
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp); /* written beside the target, then renamed: never a partial file */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        mp_fail(err, "cannot create %s: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return -1;
    }
    fputc('[', f);
    for (int32_t e = 0; e < s->n; e++) {
        int32_t u = s->node[e];
        fputs(e ? ",\n  " : "\n  ", f);
        if (rg->node_name && rg->node_name[u]) write_string(f, rg->node_name[u]);
        else fprintf(f, "\"%d\"", u);
    }
    fputs(s->n ? "\n]\n" : "]\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f)) bad = true;
    if (bad || rename(tmp, path)) {
        mp_fail(err, "cannot write the schedule %s: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
