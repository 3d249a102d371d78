/* memory.c - live bytes per step from lifetimes (an event sweep), the peak and
 * the breakdown at it. */
#include <stdlib.h>
#include <string.h>

#include "passes/memory.h"

const char *const mp_mem_cat_names[MP_MEM_COUNT] = {
    [MP_MEM_PARAMS] = "parameters",          [MP_MEM_BUFFERS] = "buffers",
    [MP_MEM_CONSTANTS] = "constants",        [MP_MEM_GRADS] = "gradients",
    [MP_MEM_OPT_STATE] = "optimizer_state",  [MP_MEM_ACTIVATIONS] = "activations",
    [MP_MEM_TRANSIENT] = "transient",        [MP_MEM_INPUTS] = "inputs",
};

static const mp_mem_cat cat_of_role[MP_ROLE_COUNT] = {
    [MP_ROLE_INPUT] = MP_MEM_INPUTS,      [MP_ROLE_PARAM] = MP_MEM_PARAMS,
    [MP_ROLE_BUFFER] = MP_MEM_BUFFERS,    [MP_ROLE_CONST] = MP_MEM_CONSTANTS,
    [MP_ROLE_ACTIVATION] = MP_MEM_ACTIVATIONS, [MP_ROLE_GRAD] = MP_MEM_GRADS,
    [MP_ROLE_OPT_STATE] = MP_MEM_OPT_STATE, [MP_ROLE_TRANSIENT] = MP_MEM_TRANSIENT,
};

mp_mem_cat mp_memory_category(const mp_graph *g, int32_t v)
{
    const mp_value *x = &g->values[v];
    if (x->role != MP_ROLE_NONE && x->role != MP_ROLE_ACTIVATION && x->role < MP_ROLE_COUNT) return cat_of_role[x->role];
    if (x->role == MP_ROLE_NONE && x->producer < 0) {
        if (x->flags & MP_VAL_INITIALIZER) return mp_dtype_is_float(x->dtype) ? MP_MEM_PARAMS : MP_MEM_CONSTANTS;
        return MP_MEM_INPUTS;
    }
    /* produced: an activation, unless nothing reads it */
    return x->ncons || (x->flags & MP_VAL_OUTPUT) ? MP_MEM_ACTIVATIONS : MP_MEM_TRANSIENT;
}

void mp_memory_free(mp_memory *m)
{
    mp_lifetime_free(&m->lt);
    free(m->cat);
    free(m->live);
    memset(m, 0, sizeof *m);
}

int64_t mp_memory_live_total(const mp_memory *m, int32_t step)
{
    int64_t t = 0;
    for (int c = 0; c < MP_MEM_COUNT; c++) t += m->live[(size_t)step * MP_MEM_COUNT + c];
    return t;
}

/* Read by a BACKWARD node. */
static bool read_by_backward(const mp_graph *g, const mp_value *x)
{
    for (int32_t c = 0; c < x->ncons; c++)
        if (x->cons[c] >= 0 && x->cons[c] < g->nnodes && g->nodes[x->cons[c]].phase == MP_PHASE_BACKWARD) return true;
    return false;
}

static int overflow(mp_err *err) { return mp_fail(err, "memory total overflows 64 bits"); }

int mp_memory_analyze(const mp_graph *g, const mp_schedule *s, mp_memory *m, mp_err *err)
{
    memset(m, 0, sizeof *m);
    m->peak_step = m->peak_node = -1;
    if (mp_lifetime_compute(g, s, &m->lt, err)) return -1;
    const mp_lifetimes *lt = &m->lt;
    m->nsteps = s->n;
    m->cat = malloc((size_t)g->nvalues + 1);
    /* one extra row: the sweep's deltas close at end + 1 */
    m->live = calloc(((size_t)s->n + 1) * MP_MEM_COUNT, sizeof *m->live);
    bool *saved = calloc((size_t)g->nvalues + 1, sizeof *saved);
    int rc = -1;
    if (!m->cat || !m->live || !saved) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].phase < MP_PHASE_COUNT) m->phase_nodes[g->nodes[i].phase]++;

    /* pass 1: categories, totals, and the open/close deltas of each buffer */
    for (int32_t v = 0; v < g->nvalues; v++) {
        m->cat[v] = (uint8_t)mp_memory_category(g, v);
        if (lt->owner[v] != v || lt->start[v] < 0) continue;
        int64_t b = lt->bytes[v];
        int c = m->cat[v];
        if (!mp_add_ok(m->totals[c], b, &m->totals[c])) goto fail_overflow;
        if (s->n == 0) { /* no steps: everything that exists is live at once */
            if (!mp_add_ok(m->peak_bytes, b, &m->peak_bytes)) goto fail_overflow;
            m->at_peak[c] += b;
            continue;
        }
        m->live[(size_t)lt->start[v] * MP_MEM_COUNT + c] += b;
        m->live[((size_t)lt->end[v] + 1) * MP_MEM_COUNT + c] -= b;
    }

    /* pass 2: prefix sums turn deltas into live bytes; find the first peak */
    for (int32_t i = 0; i < s->n; i++) {
        int64_t total = 0;
        for (int c = 0; c < MP_MEM_COUNT; c++) {
            int64_t *x = &m->live[(size_t)i * MP_MEM_COUNT + c];
            if (i > 0 && !mp_add_ok(*x, x[-MP_MEM_COUNT], x)) goto fail_overflow;
            if (!mp_add_ok(total, *x, &total)) goto fail_overflow;
        }
        if (m->peak_step < 0 || total > m->peak_bytes) {
            m->peak_bytes = total;
            m->peak_step = i;
        }
    }
    if (m->peak_step >= 0) {
        m->peak_node = s->order[m->peak_step];
        memcpy(m->at_peak, &m->live[(size_t)m->peak_step * MP_MEM_COUNT], sizeof m->at_peak);
    }

    /* pass 3: the largest buffers live at the peak (insertion into a short sorted list) */
    for (int32_t v = 0; v < g->nvalues; v++) {
        if (lt->owner[v] != v || lt->start[v] < 0 || lt->bytes[v] <= 0) continue;
        if (m->peak_step >= 0 && (lt->start[v] > m->peak_step || lt->end[v] < m->peak_step)) continue;
        int k = m->ntop;
        while (k > 0 && lt->bytes[m->top[k - 1]] < lt->bytes[v]) k--;
        if (k == MP_MEM_TOP_N) continue;
        int last = m->ntop < MP_MEM_TOP_N ? m->ntop++ : MP_MEM_TOP_N - 1;
        memmove(&m->top[k + 1], &m->top[k], (size_t)(last - k) * sizeof *m->top);
        m->top[k] = v;
    }

    /* pass 4: saved activations: forward-produced activation buffers and data
     * inputs a BACKWARD node reads, each buffer (alias owner) once, as
     * PyTorch's autograd counts unique storages (a view saves its base) */
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *x = &g->values[v];
        int32_t o = lt->owner[v];
        bool forward = x->producer >= 0 && x->producer < g->nnodes && g->nodes[x->producer].phase == MP_PHASE_FORWARD;
        bool kept = m->cat[o] == MP_MEM_ACTIVATIONS || m->cat[o] == MP_MEM_INPUTS;
        if ((!forward && x->role != MP_ROLE_INPUT) || !kept || saved[o] || !read_by_backward(g, x)) continue;
        saved[o] = true;
        if (!mp_add_ok(m->saved_activation_bytes, lt->bytes[o], &m->saved_activation_bytes)) goto fail_overflow;
    }
    rc = 0;
    goto done;
fail_overflow:
    overflow(err);
done:
    free(saved);
    if (rc) mp_memory_free(m);
    return rc;
}
