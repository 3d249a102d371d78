/* test_ir.c - the IR: names, symbols, dtypes, links. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

START_TEST(names_are_unique_per_graph)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t a = mp_graph_add_value(g, "a");
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(mp_graph_add_value(g, "a"), -1);
    for (int i = 0; i < 1000; i++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        ck_assert_int_eq(mp_graph_add_value(g, name), i + 1);
    }
    ck_assert_int_eq(mp_graph_find(g, "v999"), 1000);
    ck_assert_int_eq(mp_graph_find(g, "nope"), -1);
    mp_graph_free(g);
}
END_TEST

START_TEST(symbols_bind_and_resolve)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = mp_graph_add_value(g, "x");
    mp_dim dims[2] = {mp_sym_dim(g, "batch"), mp_dim_of(3)};
    mp_value_set(g, x, MP_FLOAT, 2, dims);
    ck_assert_int_eq(g->values[x].bytes, -1);
    mp_symbol_bind(g, "batch", 8);
    mp_value_set(g, x, MP_FLOAT, 2, g->values[x].dims);
    ck_assert_int_eq(g->values[x].bytes, 8 * 3 * 4);
    mp_graph_free(g);
}
END_TEST

START_TEST(dtype_bytes_round_and_overflow)
{
    ck_assert_int_eq(mp_dtype_bytes(MP_INT4, 3), 2);
    ck_assert_int_eq(mp_dtype_bytes(MP_BFLOAT16, 10), 20);
    ck_assert_int_eq(mp_dtype_bytes(MP_DOUBLE, INT64_MAX / 4), -1);
    ck_assert_int_eq(mp_dtype_bytes(MP_UNDEFINED, 1), -1);
}
END_TEST

START_TEST(link_rejects_two_producers)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = mp_graph_add_value(g, "x"), y = mp_graph_add_value(g, "y");
    mp_graph_add_node(g, "a", "Relu", "", 1, &x, 1, &y);
    mp_graph_add_node(g, "b", "Relu", "", 1, &x, 1, &y);
    mp_err err;
    ck_assert_int_eq(mp_graph_link(g, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "produced twice"));
    mp_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ir");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, names_are_unique_per_graph);
    tcase_add_test(tc, symbols_bind_and_resolve);
    tcase_add_test(tc, dtype_bytes_round_and_overflow);
    tcase_add_test(tc, link_rejects_two_producers);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
