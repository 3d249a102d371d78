/* fd_check.h - the finite-difference check of the gradient suites
 * (test_train.c, test_grad_rules.c): after a run of ex, compares every entry
 * of each parameter's autodiff gradient with a central difference of the
 * loss in float64 (eps 1e-6, |fd - ad| <= 1e-6 (1 + |fd|)).
 * keep[0] is the loss, keep[k] (1 <= k < nkeep) the gradient of param[k],
 * whose bound buffer is data[param[k]]. Returns the worst relative error;
 * *entries gets the number of entries checked. */
#ifndef MP_FD_CHECK_H
#define MP_FD_CHECK_H

#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "runtime/exec.h"

static double fd_compare(mp_exec *ex, const mp_graph *g, const int32_t *keep, const int32_t *param, int nkeep,
                         mp_tensor **data, const char *what, int64_t *entries)
{
    mp_err err = {""};
    int64_t total = 0;
    for (int k = 1; k < nkeep; k++) total += data[param[k]]->numel;
    double *an = malloc((size_t)(total ? total : 1) * sizeof *an), worst = 0;
    ck_assert(an);
    for (int k = 1, j = 0; k < nkeep; k++)
        for (int64_t i = 0; i < data[param[k]]->numel; i++) an[j++] = mp_tensor_get_f64(mp_exec_value(ex, keep[k]), i);
    const double eps = 1e-6;
    for (int k = 1, j = 0; k < nkeep; k++) {
        mp_tensor *t = data[param[k]];
        for (int64_t i = 0; i < t->numel; i++, j++) {
            double v = mp_tensor_get_f64(t, i), lp, lm;
            mp_tensor_set_f64(t, i, v + eps);
            ck_assert_msg(!mp_exec_run(ex, &err), "%s: %s", what, err.msg);
            lp = mp_tensor_get_f64(mp_exec_value(ex, keep[0]), 0);
            mp_tensor_set_f64(t, i, v - eps);
            ck_assert_msg(!mp_exec_run(ex, &err), "%s: %s", what, err.msg);
            lm = mp_tensor_get_f64(mp_exec_value(ex, keep[0]), 0);
            mp_tensor_set_f64(t, i, v);
            double fd = (lp - lm) / (2 * eps);
            ck_assert_msg(fabs(fd - an[j]) <= 1e-6 * (1 + fabs(fd)), "%s: %s[%lld]: autodiff %.9g, finite difference %.9g",
                          what, g->values[param[k]].name, (long long)i, an[j], fd);
            worst = fmax(worst, fabs(fd - an[j]) / (1 + fabs(fd)));
        }
    }
    free(an);
    if (entries) *entries = total;
    return worst;
}

#endif
