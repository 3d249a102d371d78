/* grad_einsum.c - the gradient of Einsum, itself an Einsum.
 *
 * Y = einsum(X_0, .., X_k) multiplies the operands along every label and sums
 * the labels the output lacks, so dX_i = einsum(dY, X_j (j != i) -> X_i's
 * labels): each label of X_i either indexes dY or another operand, and the
 * labels of neither are summed away. Three corrections remain:
 *   - a label only X_i has (summed by X_i alone): dX_i does not depend on it,
 *     so the Einsum leaves it out and an Expand broadcasts it back;
 *   - an axis X_i broadcast (size 1 against a larger label or "..." axis):
 *     the Einsum gives the full size, a SumToShape sums it to 1;
 *   - "..." axes of other operands that X_i lacks: summed by the Einsum.
 * "..." axes get free letters, so the gradient's equation has no "...".
 * A label repeated inside X_i's term (a diagonal, "ii->i") is not supported.
 * The rule reads the other operands (saved by the forward), not X_i. */
#include <string.h>

#include "ir/einsum.h"
#include "passes/autodiff.h"

#define NODE (&ad->g->nodes[node])
#define IN(k) (k < NODE->nin ? NODE->in[k] : -1)

typedef struct einsum_shape {
    mp_einsum e;
    int64_t dims[MP_EINSUM_MAX_IN][MP_MAX_RANK];
    bool present[MP_EINSUM_LABELS];
    char letter[MP_EINSUM_LABELS];  /* each label's letter in the gradient's equation */
} einsum_shape;

/* Appends the letters of labels[0..n) to s (at *len, s holds 256). */
static void put_term(char *s, size_t *len, const char *letter, const int *labels, int n)
{
    for (int a = 0; a < n && *len < 250; a++) s[(*len)++] = letter[labels[a]];
    s[*len] = 0;
}

/* A Reshape, SumToShape or Expand of v to dims (rank r): the op's output, -1 on failure. */
static int32_t to_dims(mp_ad *ad, const char *op, int32_t v, const int64_t *dims, int r)
{
    if (!strcmp(op, "SumToShape")) {
        int32_t out, n = ad_add1(ad, op, "memplan", 1, &v, "grad_einsum", &out);
        ad_attr_ints(ad->g, &ad->g->nodes[n], "shape", dims, r);
        return ad_infer(ad, n) ? -1 : out;
    }
    int32_t in[2] = {v, ad_const_ints(ad, dims, r)};
    return in[1] < 0 ? -1 : ad_emit(ad, op, "", 2, in, "grad_einsum");
}

static int grad_operand(mp_ad *ad, int32_t node, int32_t dy, const einsum_shape *es, int i)
{
    const mp_einsum *e = &es->e;
    bool elsewhere[MP_EINSUM_LABELS] = {false}, seen[MP_EINSUM_LABELS] = {false};
    for (int a = 0; a < e->out_rank; a++) elsewhere[e->out[a]] = true;
    for (int j = 0; j < e->nin; j++)
        for (int a = 0; j != i && a < e->rank[j]; a++) elsewhere[e->label[j][a]] = true;

    /* the equation "dY,X_j..->kept labels of X_i", inputs dY then X_j */
    char eq[256];
    size_t len = 0;
    int32_t in[MP_EINSUM_MAX_IN] = {dy};
    int nin = 1, kept[MP_MAX_RANK], nkept = 0;
    put_term(eq, &len, es->letter, e->out, e->out_rank);
    for (int j = 0; j < e->nin; j++) {
        if (j == i) continue;
        eq[len++] = ',';
        put_term(eq, &len, es->letter, e->label[j], e->rank[j]);
        in[nin++] = IN(j);
    }
    for (int a = 0; a < e->rank[i]; a++) {
        int l = e->label[i][a];
        if (seen[l])
            return mp_fail(ad->err, "operand %d repeats label '%c': the gradient of a diagonal is not supported", i,
                           es->letter[l]);
        seen[l] = true;
        if (elsewhere[l]) kept[nkept++] = l;
    }
    if (len + 2 + (size_t)nkept >= sizeof eq) return mp_fail(ad->err, "equation too long for its gradient");
    memcpy(eq + len, "->", 3);
    len += 2;
    put_term(eq, &len, es->letter, kept, nkept);
    int32_t g, n = ad_add1(ad, "Einsum", "", nin, in, "grad_einsum", &g);
    ad_attr_str(ad->g, &ad->g->nodes[n], "equation", eq);
    if (ad_infer(ad, n)) return -1;

    /* X_i's axes as the Einsum gives them (1 where it left a label out), then summed where X_i broadcast */
    int64_t got[MP_MAX_RANK], full[MP_MAX_RANK], summed[MP_MAX_RANK];
    int rank;
    if (ad_known_dims(ad, g, got, &rank)) return -1;
    bool lonely = false, sum = false, expand = false;
    for (int a = 0, k = 0; a < e->rank[i]; a++) {
        bool here = elsewhere[e->label[i][a]];
        full[a] = here ? got[k++] : 1;
        summed[a] = es->dims[i][a] == 1 ? 1 : full[a];
        lonely |= !here;
        sum |= summed[a] != full[a];
        expand |= summed[a] != es->dims[i][a];
    }
    if (lonely && (g = to_dims(ad, "Reshape", g, full, e->rank[i])) < 0) return -1;
    if (sum && (g = to_dims(ad, "SumToShape", g, summed, e->rank[i])) < 0) return -1;
    if (expand && (g = to_dims(ad, "Expand", g, es->dims[i], e->rank[i])) < 0) return -1;
    return ad_give(ad, IN(i), g, true);
}

int mp_grad_Einsum(mp_ad *ad, int32_t node, const int32_t *dy)
{
    const char *eq = mp_attr_str(NODE, "equation", NULL);
    if (!eq) return mp_fail(ad->err, "attribute 'equation' is required");
    if (NODE->nin > MP_EINSUM_MAX_IN) return mp_fail(ad->err, "more than %d operands", MP_EINSUM_MAX_IN);
    einsum_shape es;
    int ranks[MP_EINSUM_MAX_IN];
    for (int k = 0; k < NODE->nin; k++)
        if (ad_known_dims(ad, IN(k), es.dims[k], &ranks[k])) return -1;
    if (mp_einsum_parse(eq, NODE->nin, ranks, &es.e, ad->err)) return -1;

    bool used[MP_EINSUM_LETTERS] = {false};
    for (int l = 0; l < MP_EINSUM_LABELS; l++) es.present[l] = false, es.letter[l] = mp_einsum_char(l);
    for (int k = 0; k < NODE->nin; k++)
        for (int a = 0; a < ranks[k]; a++) {
            int l = es.e.label[k][a];
            es.present[l] = true;
            if (l < MP_EINSUM_LETTERS) used[l] = true;
        }
    for (int l = MP_EINSUM_ELLIPSIS, free = 0; l < MP_EINSUM_LABELS; l++) { /* "..." axes: the unused letters */
        if (!es.present[l]) continue;
        while (free < MP_EINSUM_LETTERS && used[free]) free++;
        if (free == MP_EINSUM_LETTERS) return mp_fail(ad->err, "no letters left to name the '...' axes");
        es.letter[l] = mp_einsum_char(free);
        used[free] = true;
    }
    for (int i = 0; i < NODE->nin; i++)
        if (ad_needs(ad, IN(i)) && grad_operand(ad, node, dy[0], &es, i)) return -1;
    return 0;
}
