/* einsum.c - Einsum equations: terms, labels per axis, the output term. */
#include <string.h>

#include "einsum.h"

static int letter_label(char c)
{
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
    return -1;
}

char mp_einsum_char(int label)
{
    if (label < 0 || label >= MP_EINSUM_LETTERS) return 0;
    return (char)(label < 26 ? 'a' + label : 'A' + label - 26);
}

int mp_einsum_term(const char *s, size_t len, int *letters, int *nletters, int *ellipsis_at, mp_err *err)
{
    *nletters = 0;
    *ellipsis_at = -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') continue;
        if (s[i] == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.' || *ellipsis_at >= 0)
                return mp_fail(err, "equation has a stray '.' or more than one '...' in a term");
            *ellipsis_at = *nletters;
            i += 2;
            continue;
        }
        int l = letter_label(s[i]);
        if (l < 0) return mp_fail(err, "equation has an invalid character '%c'", s[i]);
        if (*nletters >= MP_MAX_RANK) return mp_fail(err, "equation term has more than %d labels", MP_MAX_RANK);
        letters[(*nletters)++] = l;
    }
    return 0;
}

/* The labels of a term's `rank` axes; *nell gets the axes "..." covers. */
static int term_axes(const char *s, size_t len, int rank, int *axes, int *nell, mp_err *err)
{
    int letters[MP_MAX_RANK], nl, at;
    if (mp_einsum_term(s, len, letters, &nl, &at, err)) return -1;
    *nell = at >= 0 ? rank - nl : 0;
    if (*nell < 0 || (at < 0 && nl != rank))
        return mp_fail(err, "a term has %d labels%s for rank %d", nl, at >= 0 ? " and '...'" : "", rank);
    for (int i = 0, a = 0; i <= nl; i++) {
        if (i == at)
            for (int k = 0; k < *nell; k++) axes[a++] = MP_EINSUM_LABELS - *nell + k;
        if (i < nl) axes[a++] = letters[i];
    }
    return 0;
}

int mp_einsum_parse(const char *eq, int nin, const int *ranks, mp_einsum *e, mp_err *err)
{
    if (nin < 1 || nin > MP_EINSUM_MAX_IN) return mp_fail(err, "Einsum takes 1..%d operands, not %d", MP_EINSUM_MAX_IN, nin);
    memset(e, 0, sizeof *e);
    e->nin = nin;
    const char *arrow = strstr(eq, "->"), *lhs_end = arrow ? arrow : eq + strlen(eq), *p = eq;
    int count[MP_EINSUM_LABELS] = {0};
    for (int k = 0; k < nin; k++) {
        const char *end = memchr(p, ',', (size_t)(lhs_end - p));
        if (!end) end = lhs_end;
        if ((k + 1 < nin) != (end < lhs_end)) return mp_fail(err, "equation has a term count other than the %d inputs", nin);
        int nell;
        if (ranks[k] < 0 || ranks[k] > MP_MAX_RANK) return mp_fail(err, "operand %d has no known rank", k);
        e->rank[k] = ranks[k];
        if (term_axes(p, (size_t)(end - p), ranks[k], e->label[k], &nell, err)) return -1;
        if (nell > e->nell) e->nell = nell;
        for (int a = 0; a < ranks[k]; a++) count[e->label[k][a]]++;
        p = end + 1;
    }
    if (arrow) {
        const char *s = arrow + 2;
        int letters[MP_MAX_RANK], nl, at;
        if (mp_einsum_term(s, strlen(s), letters, &nl, &at, err)) return -1;
        int rank = nl + (at >= 0 ? e->nell : 0);
        if (rank > MP_MAX_RANK) return mp_fail(err, "output rank %d exceeds %d", rank, MP_MAX_RANK);
        if (term_axes(s, strlen(s), rank, e->out, &nl, err)) return -1;
        e->out_rank = rank;
        bool seen[MP_EINSUM_LABELS] = {false};
        for (int a = 0; a < rank; a++) {
            int l = e->out[a];
            if (!count[l]) return mp_fail(err, "output label '%c' is in no input", mp_einsum_char(l));
            if (seen[l]) return mp_fail(err, "output label '%c' appears twice", mp_einsum_char(l));
            seen[l] = true;
        }
    } else {
        for (int k = 0; k < e->nell; k++) e->out[e->out_rank++] = MP_EINSUM_LABELS - e->nell + k;
        for (int i = 0; i < MP_EINSUM_LETTERS; i++) {
            int l = (i + 26) % MP_EINSUM_LETTERS; /* ASCII: A-Z (26..51) before a-z */
            if (count[l] != 1) continue;
            if (e->out_rank == MP_MAX_RANK) return mp_fail(err, "implicit output rank exceeds %d", MP_MAX_RANK);
            e->out[e->out_rank++] = l;
        }
    }
    return 0;
}
