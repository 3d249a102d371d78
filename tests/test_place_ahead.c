/* test_place_ahead.c - the solver's plans placed while it searches
 * (codegen/place_ahead.h): the order and arena handed back are the ones the
 * plan gets placed directly, a plan never offered is not handed back, and
 * nothing leaks or races (the suite also runs under the sanitizers). Newer
 * plans are offered before, while and after an older one is placed, so that
 * placements are stopped and dropped; on this small model a stopped search
 * has already found its arena, so a dropped placement handed back would not
 * show here: the code keeps none (place_ahead.c, work). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/place_ahead.h"
#include "codegen/plan.h"
#include "passes/cost.h"
#include "passes/lifetime.h"
#include "passes/remat.h"

#define MODEL(f) MEMPLAN_SOURCE "/models/" f

typedef struct fixture {
    mp_model *m;
    mp_schedule s;
    mp_lifetimes lt;
    mp_rgraph rg;
    mp_rspace sp;
    mp_plan_opts po;
} fixture;

static void setup_model(fixture *f)
{
    mp_err err = {""};
    f->po = mp_plan_defaults();
    f->po.batch = 4;
    snprintf(f->po.dim_names[0], sizeof f->po.dim_names[0], "sequence");
    f->po.dim_values[0] = 64;
    f->po.ndims = 1;
    snprintf(f->po.strategy, sizeof f->po.strategy, "ilp");
    f->po.arena_work = 100000000; /* fixed work, as the command places: the same arena however long it takes */
    f->m = mp_plan_step_new(MODEL("gpt_decoder.onnx"), &f->po, &f->s, &err);
    ck_assert_msg(f->m, "%s", err.msg);
    const mp_gpu *gpu = mp_gpu_find("a100-80", &err);
    ck_assert_msg(gpu, "%s", err.msg);
    ck_assert_msg(!mp_lifetime_compute(f->m->graph, &f->s, &f->lt, &err), "%s", err.msg);
    ck_assert_msg(!mp_rgraph_from_training(f->m->graph, &f->s, &f->lt, gpu, &f->rg, &err), "%s", err.msg);
    ck_assert_msg(!mp_rspace_build(&f->rg, NULL, &f->sp, &err), "%s", err.msg);
    ck_assert_int_gt(f->sp.ncand, 0);
}

static void teardown_model(fixture *f)
{
    mp_rspace_free(&f->sp);
    mp_rgraph_free(&f->rg);
    mp_lifetime_free(&f->lt);
    mp_schedule_free(&f->s);
    mp_onnx_close(f->m);
}

/* The plan's order as the CLI makes it (emitted, pruned to target) and its arena placed directly. */
static void direct(const fixture *f, const mp_rplan *rp, int64_t target, mp_rsched *s, mp_plan_info *info)
{
    mp_err err = {""};
    int32_t pruned;
    ck_assert_msg(!mp_rplan_emit(&f->sp, rp, s, &err), "%s", err.msg);
    ck_assert_msg(!mp_rsched_prune(&f->rg, s, target, &pruned, &err), "%s", err.msg);
    memset(info, 0, sizeof *info);
    ck_assert_msg(!mp_plan_measure(MODEL("gpt_decoder.onnx"), &f->po, s, info, &err), "%s", err.msg);
}

static void ck_same(const mp_rsched *a, const mp_plan_info *ia, const mp_rsched *b, const mp_plan_info *ib)
{
    ck_assert_int_eq(a->n, b->n);
    ck_assert(!memcmp(a->node, b->node, (size_t)a->n * sizeof *a->node));
    ck_assert_int_eq(ia->arena_bytes, ib->arena_bytes);
    ck_assert_int_eq(ia->lower_bound, ib->lower_bound);
    ck_assert_int_eq(ia->nbuffers, ib->nbuffers);
}

typedef struct counter {
    place_ahead *a;
    const mp_rspace *sp;
    int64_t target;
    int offers, fitting;
} counter;

/* Each plan offered is one of the space (its peak counts) and is passed on. */
static void count_offer(void *ctx, const int32_t *choice)
{
    counter *c = ctx;
    mp_err err = {""};
    int64_t peak;
    ck_assert_msg(!mp_rplan_peak(c->sp, &(mp_rplan){.choice = (int32_t *)choice}, NULL, &peak, &err), "%s", err.msg);
    c->offers++;
    c->fitting += peak <= c->target;
    place_ahead_offer(c->a, choice);
}

static void sleep_ms(int ms)
{
    struct timespec t = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&t, NULL);
}

/* A solve at 70 % of the store-everything peak offers its plans as it finds
 * them; its own plan comes back placed as directly. */
START_TEST(solve_offers_its_plan)
{
    fixture f;
    setup_model(&f);
    mp_err err = {""};
    int64_t target = f.sp.resident_bytes + (f.sp.base_peak - f.sp.resident_bytes) * 7 / 10;
    place_ahead_cfg cfg = {.model = MODEL("gpt_decoder.onnx"), .sp = &f.sp, .target = target, .po = f.po};
    counter c = {.a = place_ahead_start(&cfg), .sp = &f.sp, .target = target};
    ck_assert(c.a);
    mp_rsolve_opts so = mp_rsolve_defaults();
    so.time_limit = 2;
    so.on_plan = count_offer;
    so.on_plan_ctx = &c;
    mp_rplan rp;
    mp_rsolve_info info;
    ck_assert_msg(!mp_remat_solve(&f.sp, target, &so, &rp, &info, &err), "%s", err.msg);
    ck_assert_int_ne(info.status, MP_RSOLVE_INFEASIBLE);
    ck_assert_int_ge(c.fitting, 1);
    mp_rsched got, want;
    mp_plan_info gi, wi;
    ck_assert(place_ahead_finish(c.a, rp.choice, &got, &gi));
    direct(&f, &rp, target, &want, &wi);
    ck_same(&got, &gi, &want, &wi);
    mp_rsched_free(&got);
    mp_rsched_free(&want);
    mp_rplan_free(&rp);
    teardown_model(&f);
}
END_TEST

/* Offered plans overtaken by a newer one, a final plan never offered, and no
 * final at all: only an offered final comes back, and it is placed right. */
START_TEST(only_the_final_offered_plan)
{
    fixture f;
    setup_model(&f);
    mp_err err = {""};
    int64_t hi = f.sp.base_peak - 1, lo = f.sp.resident_bytes + (f.sp.base_peak - f.sp.resident_bytes) / 2;
    mp_rplan a, b;
    mp_rsolve_info info;
    mp_rsolve_opts so = mp_rsolve_defaults();
    so.time_limit = 2;
    ck_assert_msg(!mp_remat_solve(&f.sp, hi, &so, &a, &info, &err), "%s", err.msg);
    ck_assert_msg(!mp_remat_solve(&f.sp, lo, &so, &b, &info, &err), "%s", err.msg);
    ck_assert(memcmp(a.choice, b.choice, (size_t)f.sp.ndrop * sizeof *a.choice)); /* two different plans */
    place_ahead_cfg cfg = {.model = MODEL("gpt_decoder.onnx"), .sp = &f.sp, .target = hi, .po = f.po};
    mp_rsched got, want;
    mp_plan_info gi, wi;
    for (int round = 0; round < 4; round++) { /* a newer plan before a's placement starts, while it runs, after */
        int wait = (int[]){0, 2, 10, 40}[round];
        place_ahead *pa = place_ahead_start(&cfg);
        ck_assert(pa);
        place_ahead_offer(pa, a.choice);
        sleep_ms(wait);
        place_ahead_offer(pa, b.choice);
        ck_assert(place_ahead_finish(pa, b.choice, &got, &gi)); /* b fits hi too */
        direct(&f, &b, hi, &want, &wi);
        ck_same(&got, &gi, &want, &wi);
        mp_rsched_free(&got);
        mp_rsched_free(&want);

        pa = place_ahead_start(&cfg); /* a overtaken by b, then the solve returns a: a only if placed whole */
        place_ahead_offer(pa, a.choice);
        sleep_ms(wait);
        place_ahead_offer(pa, b.choice);
        if (place_ahead_finish(pa, a.choice, &got, &gi)) {
            direct(&f, &a, hi, &want, &wi);
            ck_same(&got, &gi, &want, &wi);
            mp_rsched_free(&got);
            mp_rsched_free(&want);
        }
        pa = place_ahead_start(&cfg);
        place_ahead_offer(pa, a.choice);
        ck_assert(!place_ahead_finish(pa, b.choice, &got, &gi)); /* never offered */
        pa = place_ahead_start(&cfg);
        place_ahead_offer(pa, a.choice);
        ck_assert(!place_ahead_finish(pa, NULL, &got, &gi)); /* the solve found none */
        pa = place_ahead_start(&cfg); /* a's placement stopped by b, then a again: a's whole placement comes back */
        place_ahead_offer(pa, a.choice);
        sleep_ms(wait);
        place_ahead_offer(pa, b.choice);
        place_ahead_offer(pa, a.choice);
        ck_assert(place_ahead_finish(pa, a.choice, &got, &gi));
        direct(&f, &a, hi, &want, &wi);
        ck_same(&got, &gi, &want, &wi);
        mp_rsched_free(&got);
        mp_rsched_free(&want);
    }
    /* a plan past the target is not placed: the caller recounts it itself */
    cfg.target = lo - 1;
    place_ahead *pa = place_ahead_start(&cfg);
    place_ahead_offer(pa, a.choice);
    ck_assert(!place_ahead_finish(pa, a.choice, &got, &gi));
    mp_rplan_free(&a);
    mp_rplan_free(&b);
    teardown_model(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("place_ahead");
    TCase *tc = tcase_create("place_ahead");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, solve_offers_its_plan);
    tcase_add_test(tc, only_the_final_offered_plan);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
