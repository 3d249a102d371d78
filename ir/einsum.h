/* einsum.h - Einsum equations, parsed once for the kernels and the gradient.
 *
 *   int ranks[2] = {3, 3};
 *   mp_einsum e;
 *   mp_einsum_parse("bij,bjk->bik", 2, ranks, &e, &err);
 *   e.label[1][2];            // 'k' - 'a': the label of operand 1's axis 2
 *
 * Labels: a-z are 0..25, A-Z 26..51; the axes "..." covers are
 * MP_EINSUM_ELLIPSIS and up, right-aligned, so that broadcast ellipsis axes
 * of different operands share a label. Without "->" the output is the
 * ellipsis axes, then the labels used once, in ASCII order (A-Z before a-z),
 * as numpy orders them.
 */
#ifndef MP_EINSUM_H
#define MP_EINSUM_H

#include "ir.h"

#define MP_EINSUM_LETTERS 52
#define MP_EINSUM_ELLIPSIS MP_EINSUM_LETTERS
#define MP_EINSUM_LABELS (MP_EINSUM_LETTERS + MP_MAX_RANK)
#define MP_EINSUM_MAX_IN 8

/* One term as written: letter labels in order and where "..." stands (-1: absent). */
int mp_einsum_term(const char *s, size_t len, int *letters, int *nletters, int *ellipsis_at, mp_err *err);

typedef struct mp_einsum {
    int nin;
    int rank[MP_EINSUM_MAX_IN];
    int label[MP_EINSUM_MAX_IN][MP_MAX_RANK]; /* the label of each axis of each operand */
    int out_rank;
    int out[MP_MAX_RANK];                      /* the label of each output axis */
    int nell;                                  /* axes of the widest "..." */
} mp_einsum;

/* Parses eq for nin operands of the given ranks; fails naming the problem. */
int mp_einsum_parse(const char *eq, int nin, const int *ranks, mp_einsum *e, mp_err *err);

/* The equation letter of a label (labels of "..." have none: 0). */
char mp_einsum_char(int label);

#endif
