/* test_ir.c - the IR: names, symbols, dtypes, links. */
#include <check.h>
#include <math.h>
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

/* name_K with the least free K, as a search from 1 each time gives */
START_TEST(unique_names_take_the_least_free_suffix)
{
    mp_graph *g = mp_graph_new(NULL);
    static const char *const want[][2] = {{"x", "x"}, {"x", "x_1"}, {"x_3", NULL}, {"x", "x_2"}, {"x", "x_4"},
                                          {"x_1", "x_1_1"}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        if (!want[i][1]) { /* taken by another way */
            ck_assert_int_ge(mp_graph_add_value(g, want[i][0]), 0);
            continue;
        }
        int32_t id = mp_graph_add_unique(g, want[i][0]); /* before g->values is read: adding may move it */
        ck_assert_str_eq(g->values[id].name, want[i][1]);
    }
    for (int i = 0; i < 3000; i++) mp_graph_add_unique(g, "y"); /* y, y_1 .. y_2999 */
    ck_assert_int_ge(mp_graph_find(g, "y_2999"), 0);
    ck_assert_int_eq(mp_graph_find(g, "y_3000"), -1);
    char longname[700];
    memset(longname, 'z', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    int32_t a = mp_graph_add_unique(g, longname), b = mp_graph_add_unique(g, longname), c = mp_graph_add_unique(g, longname);
    ck_assert_str_eq(g->values[a].name, longname);
    const char *nb = g->values[b].name, *nc = g->values[c].name;
    ck_assert(strlen(nb) < 512 && !strcmp(nb + strlen(nb) - 2, "_1")); /* cut, but its suffix kept */
    ck_assert(strlen(nc) < 512 && !strcmp(nc + strlen(nc) - 2, "_2"));
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

/* bf16 stores round to nearest even, and every NaN stays a NaN (a NaN with a
 * full low mantissa would carry into the sign: 0x7fffffff -> 0x8000, -0). */
START_TEST(bf16_store_rounds_and_keeps_nan)
{
    mp_arena *a = mp_arena_new();
    mp_tensor *t = mp_tensor_new(a, MP_BFLOAT16, 1, (int64_t[]){4});
    uint32_t bits = 0x7fffffffu, neg = 0xffffffffu;
    float nan1, nan2;
    memcpy(&nan1, &bits, 4);
    memcpy(&nan2, &neg, 4);
    mp_tensor_set_f64(t, 0, nan1);
    mp_tensor_set_f64(t, 1, nan2);
    mp_tensor_set_f64(t, 2, 1.0 + 1.0 / 256);       /* a tie: to the even 1.0 */
    mp_tensor_set_f64(t, 3, 1.0 + 3.0 / 256);       /* a tie: to the even 1 + 4/256 */
    const uint16_t *h = t->data;
    ck_assert_msg((h[0] & 0x7f80) == 0x7f80 && (h[0] & 0x7f), "bf16 of NaN is 0x%04x", h[0]);
    ck_assert_msg((h[1] & 0x7f80) == 0x7f80 && (h[1] & 0x7f), "bf16 of -NaN is 0x%04x", h[1]);
    ck_assert_uint_eq(h[2], 0x3f80);
    ck_assert_uint_eq(h[3], 0x3f82);
    ck_assert(isnan(mp_tensor_get_f64(t, 0)));
    mp_arena_free(a);
}
END_TEST

/* Dtypes without an encoding here are left as they were, and a store never
 * bounces between the integer and the float setter (it recursed forever on
 * 8-bit floats); float16 from an integer goes through the float path. */
START_TEST(store_without_encoding_is_a_no_op)
{
    mp_arena *a = mp_arena_new();
    mp_dtype none[] = {MP_FLOAT8E4M3FN, MP_FLOAT8E5M2FNUZ, MP_FLOAT4E2M1, MP_INT4, MP_FLOAT8E8M0};
    for (size_t k = 0; k < sizeof none / sizeof *none; k++) {
        mp_tensor *t = mp_tensor_new(a, none[k], 1, (int64_t[]){2});
        mp_tensor_set_f64(t, 0, 1.0);
        mp_tensor_set_i64(t, 1, 1);
        ck_assert_uint_eq(((const uint8_t *)t->data)[0] | ((const uint8_t *)t->data)[1], 0);
    }
    mp_tensor *h = mp_tensor_new(a, MP_FLOAT16, 1, (int64_t[]){1});
    mp_tensor_set_i64(h, 0, 3);
    ck_assert_uint_eq(((const uint16_t *)h->data)[0], 0x4200);
    mp_arena_free(a);
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
    tcase_add_test(tc, unique_names_take_the_least_free_suffix);
    tcase_add_test(tc, symbols_bind_and_resolve);
    tcase_add_test(tc, dtype_bytes_round_and_overflow);
    tcase_add_test(tc, link_rejects_two_producers);
    tcase_add_test(tc, bf16_store_rounds_and_keeps_nan);
    tcase_add_test(tc, store_without_encoding_is_a_no_op);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
