/* test_remat_graph.c - the rematerialization graph: from training steps (the
 * store-everything order recounts to exactly mp_memory_analyze's peak), from
 * the Checkmate/Moccasin graph-json files (node counts, a topological order),
 * and every malformed graph-json file rejected with its own error. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/json_read.h"
#include "frontend/onnx.h"
#include "passes/arena.h"
#include "passes/cost.h"
#include "passes/memory.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/train.h"

/* ---- training steps ----------------------------------------------------------- */

static mp_model *load_step_with(const char *path, int64_t batch, const mp_train_opts *o)
{
    mp_err err = {{0}};
    mp_model *mdl = mp_onnx_load(path, &err);
    ck_assert_msg(mdl != NULL, "%s", err.msg);
    mp_graph *g = mdl->graph;
    const char *names[] = {"sequence"};
    int64_t values[] = {64};
    mp_bindings b = {.batch = batch, .nnamed = mp_symbol_find(g, "sequence") >= 0, .names = names, .values = values};
    ck_assert_msg(mp_bind_dims(g, &b, &err) == 0 && mp_infer(g, &err) == 0, "%s: %s", path, err.msg);
    ck_assert_msg(mp_train_build(g, o, &err) == 0, "%s: %s", path, err.msg);
    return mdl;
}

static mp_model *load_step(const char *name, int64_t batch)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", MEMPLAN_SOURCE, name);
    mp_train_opts o = mp_train_defaults();
    return load_step_with(path, batch, &o);
}

/* The identity order of the rgraph counts to the memory analysis' peak, byte
 * for byte, whatever the optimizer, precision and accumulation (in-place aliases). */
START_TEST(test_training_identity_peak)
{
    static const struct {
        const char *model;
        mp_opt_kind opt;
        mp_dtype precision;
        int micro;
    } models[] = {
        {"mlp.onnx", MP_OPT_ADAMW, MP_FLOAT, 1},         {"cnn_bn.onnx", MP_OPT_ADAMW, MP_FLOAT, 1},
        {"gpt_decoder.onnx", MP_OPT_ADAMW, MP_FLOAT, 1}, {"cnn_bn.onnx", MP_OPT_SGD, MP_FLOAT, 2},
        {"cnn_bn.onnx", MP_OPT_MOMENTUM, MP_BFLOAT16, 1}, {"gpt_decoder.onnx", MP_OPT_ADAFACTOR, MP_FLOAT16, 4},
        {"mlp.onnx", MP_OPT_ADAM, MP_FLOAT, 3},
    };
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/models/%s", MEMPLAN_SOURCE, models[k].model);
        mp_train_opts o = mp_train_defaults();
        o.optimizer = models[k].opt;
        o.precision = models[k].precision;
        o.micro_batches = models[k].micro;
        mp_model *mdl = load_step_with(path, 4, &o);
        mp_graph *g = mdl->graph;
        mp_err err = {{0}};
        mp_schedule s;
        mp_memory m;
        ck_assert_int_eq(mp_schedule_graph_order(g, &s, &err), 0);
        ck_assert_msg(mp_memory_analyze(g, &s, &m, &err) == 0, "%s", err.msg);
        mp_rgraph rg;
        ck_assert_msg(mp_rgraph_from_training(g, &s, &m.lt, mp_gpu_find("h100", &err), &rg, &err) == 0, "%s: %s",
                      path, err.msg);
        ck_assert_int_eq(rg.nnodes, g->nnodes);
        mp_rsched id;
        mp_rcount c;
        ck_assert_int_eq(mp_rsched_identity(&rg, &id, &err), 0);
        ck_assert_msg(mp_rsched_count(&rg, &id, &c, &err) == 0, "%s: %s", path, err.msg);
        /* the lifetimes' peak with every buffer padded as the arena pads it */
        int64_t align = mp_arena_defaults().alignment, padded_peak = 0;
        for (int32_t t = 0; t < m.lt.nsteps; t++) {
            int64_t live = 0;
            for (int32_t v = 0; v < m.lt.nvalues; v++)
                if (m.lt.owner[v] == v && m.lt.start[v] >= 0 &&
                    (m.lt.persistent[v] || (m.lt.start[v] <= t && t <= m.lt.end[v])))
                    live += (m.lt.bytes[v] + align - 1) / align * align;
            if (live > padded_peak) padded_peak = live;
        }
        ck_assert_int_ge(padded_peak, m.peak_bytes);
        ck_assert_msg(c.peak_bytes == padded_peak, "%s (case %zu): rgraph peak %lld, padded lifetimes' peak %lld", path,
                      k, (long long)c.peak_bytes, (long long)padded_peak);
        ck_assert_double_eq(c.recompute_cost, 0);
        ck_assert(c.cost > 0);
        /* forward nodes may be recomputed, the rest never; every value has a real IR owner */
        int forward = 0, recomputable = 0;
        for (int32_t i = 0; i < rg.nnodes; i++) {
            forward += g->nodes[s.order[i]].phase == MP_PHASE_FORWARD;
            recomputable += rg.recomputable[i];
            ck_assert(!rg.recomputable[i] || g->nodes[s.order[i]].phase == MP_PHASE_FORWARD);
        }
        ck_assert_int_gt(recomputable, 0);
        ck_assert_int_le(recomputable, forward);
        int64_t resident = 0;
        for (int32_t v = 0; v < rg.nvalues; v++) {
            ck_assert_int_ge(rg.value_id[v], 0);
            ck_assert_int_eq(m.lt.owner[rg.value_id[v]], rg.value_id[v]);
            if (rg.producer[v] < 0) resident += rg.bytes[v];
        }
        ck_assert_int_ge(resident, m.at_peak[MP_MEM_PARAMS] + m.at_peak[MP_MEM_OPT_STATE]);
        mp_rsched_free(&id);
        mp_rgraph_free(&rg);
        mp_memory_free(&m);
        mp_schedule_free(&s);
        mp_onnx_close(mdl);
    }
}
END_TEST

/* The step's graph order, its lifetimes and the rgraph built from them (no GPU: unit costs). */
static void rgraph_of(const mp_graph *g, mp_schedule *s, mp_lifetimes *lt, mp_rgraph *rg)
{
    mp_err err = {{0}};
    ck_assert_msg(mp_schedule_graph_order(g, s, &err) == 0, "%s", err.msg);
    ck_assert_msg(mp_lifetime_compute(g, s, lt, &err) == 0, "%s", err.msg);
    ck_assert_msg(mp_rgraph_from_training(g, s, lt, NULL, rg, &err) == 0, "%s", err.msg);
}

static void rgraph_free(mp_schedule *s, mp_lifetimes *lt, mp_rgraph *rg)
{
    mp_rgraph_free(rg);
    mp_lifetime_free(lt);
    mp_schedule_free(s);
}

/* Dropout's outputs are pinned (not recomputable identically), its node never rerun. */
START_TEST(test_training_pins)
{
    mp_model *mdl = load_step("gpt_decoder.onnx", 2);
    mp_graph *g = mdl->graph;
    mp_err err = {{0}};
    mp_schedule s;
    mp_lifetimes lt;
    mp_rgraph rg;
    rgraph_of(g, &s, &lt, &rg);
    int pinned = 0;
    for (int32_t i = 0; i < rg.nnodes; i++) {
        const mp_node *nd = &g->nodes[s.order[i]];
        for (int32_t k = rg.out_off[i]; k < rg.out_off[i + 1]; k++) {
            int32_t v = rg.out[k];
            ck_assert_int_eq(rg.producer[v], i);
            if (!strcmp(nd->op_type, "Dropout")) ck_assert(rg.pinned[v]);
            const mp_value *x = &g->values[rg.value_id[v]];
            if (!mp_dtype_is_float(x->dtype) && x->rank <= 1) ck_assert(rg.pinned[v]); /* shapes */
            pinned += rg.pinned[v];
        }
        if (!strcmp(nd->op_type, "Dropout")) ck_assert(!rg.recomputable[i]);
        for (int32_t k = rg.in_off[i]; k < rg.in_off[i + 1]; k++) ck_assert_int_lt(rg.producer[rg.in[k]], i);
    }
    ck_assert_int_ge(pinned, 0);
    /* a bad pairing of lifetimes and schedule is refused */
    mp_schedule half = {s.order, s.n - 1};
    mp_rgraph bad;
    ck_assert_int_eq(mp_rgraph_from_training(g, &half, &lt, NULL, &bad, &err), -1);
    rgraph_free(&s, &lt, &rg);
    mp_onnx_close(mdl);
}
END_TEST

/* A Dropout of ratio 0 (torchvision's ViT) shares its input's buffer: its
 * output is a view, so the GELU output under it stays droppable. */
START_TEST(test_training_identity_dropout)
{
    const char *path = MEMPLAN_SHARED "/models/torch/vit_b_16_train.onnx";
    struct stat st;
    if (stat(path, &st)) {
        fprintf(stderr, "test_remat_graph: %s absent, skipped\n", path);
        return;
    }
    mp_train_opts o = mp_train_defaults();
    mp_model *mdl = load_step_with(path, 1, &o);
    mp_graph *g = mdl->graph;
    mp_schedule s;
    mp_lifetimes lt;
    mp_rgraph rg;
    rgraph_of(g, &s, &lt, &rg);
    int identities = 0;
    for (int32_t i = 0; i < rg.nnodes; i++) {
        const mp_node *nd = &g->nodes[s.order[i]];
        if (strcmp(nd->op_type, "Dropout") || nd->in[0] < 0 || lt.owner[nd->out[0]] != lt.owner[nd->in[0]]) continue;
        identities++;
        for (int32_t k = rg.out_off[i]; k < rg.out_off[i + 1]; k++) /* the view makes nothing, a mask stays pinned */
            ck_assert(rg.value_id[rg.out[k]] != lt.owner[nd->in[0]] && rg.pinned[rg.out[k]]);
        for (int32_t v = 0; v < rg.nvalues; v++)
            if (rg.value_id[v] == lt.owner[nd->in[0]]) ck_assert(!rg.pinned[v]);
    }
    ck_assert_int_ge(identities, 12); /* one per MLP block at least */
    rgraph_free(&s, &lt, &rg);
    mp_onnx_close(mdl);
}
END_TEST

/* ---- graph-json ------------------------------------------------------------------ */

#define GRAPHS MEMPLAN_SHARED "/remat-graphs/"

static bool have_graphs(void)
{
    struct stat st;
    if (stat(GRAPHS "README.md", &st) == 0) return true;
    fprintf(stderr, "test_remat_graph: %s absent, graph-json files skipped\n", GRAPHS);
    return false;
}

/* Every file: its node count, its backward count, a topological order, every value sized. */
START_TEST(test_json_files)
{
    if (!have_graphs()) return;
    static const struct {
        const char *file;
        int nodes, backward;
    } files[] = {
        {"MobileNet_512_224x224x3_test_nx.json", 92, 0},  {"MobileNet_512_224x224x3_train_nx.json", 185, 93},
        {"VGG16_256_224x224x3_test_nx.json", 22, 0},      {"VGG16_256_224x224x3_train_nx.json", 45, 23},
        {"VGG19_256_224x224x3_test_nx.json", 25, 0},      {"VGG19_256_224x224x3_train_nx.json", 51, 26},
        {"fcn_8_vgg_32_416x608x3_test_nx.json", 36, 0},   {"fcn_8_vgg_32_416x608x3_train_nx.json", 73, 37},
        {"segnet_32_416x608x3_test_nx.json", 38, 0},      {"segnet_32_416x608x3_train_nx.json", 77, 39},
        {"vgg_unet_32_416x608x3_test_nx.json", 35, 0},    {"vgg_unet_32_416x608x3_train_nx.json", 71, 36},
        {"random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14.json", 100, 0},
        {"random_layered_n250_w0.43_nlv0.75_ed0.2_scd0.14.json", 250, 0},
        {"random_layered_n500_w0.36_nlv0.75_ed0.2_scd0.14.json", 500, 0},
    };
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[512];
        snprintf(path, sizeof path, GRAPHS "%s", files[f].file);
        mp_rgraph rg;
        mp_err err = {{0}};
        ck_assert_msg(mp_rgraph_from_json(path, &rg, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(rg.nnodes, files[f].nodes);
        ck_assert_int_eq(rg.nvalues, files[f].nodes); /* no param_cost in these files */
        int backward = 0;
        for (int32_t i = 0; i < rg.nnodes; i++) {
            backward += !rg.recomputable[i];
            ck_assert_int_eq(rg.out_off[i + 1] - rg.out_off[i], 1);
            ck_assert_int_eq(rg.producer[rg.out[rg.out_off[i]]], i);
            for (int32_t k = rg.in_off[i]; k < rg.in_off[i + 1]; k++) ck_assert_int_lt(rg.producer[rg.in[k]], i);
            ck_assert(rg.bytes[i] > 0 || strstr(files[f].file, "random"));
            ck_assert(rg.cost[i] >= 0);
        }
        ck_assert_int_eq(backward, files[f].backward);
        mp_rsched id;
        mp_rcount c;
        ck_assert_int_eq(mp_rsched_identity(&rg, &id, &err), 0);
        ck_assert_msg(mp_rsched_count(&rg, &id, &c, &err) == 0, "%s: %s", files[f].file, err.msg);
        ck_assert(c.peak_bytes > 0);
        mp_rsched_free(&id);
        mp_rgraph_free(&rg);
    }
    /* Moccasin's files list nodes out of order: Kahn's order by id, the source (id 0) first */
    mp_rgraph rg;
    mp_err err = {{0}};
    ck_assert_int_eq(mp_rgraph_from_json(GRAPHS "random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14.json", &rg, &err), 0);
    ck_assert_str_eq(rg.node_name[0], "0");
    ck_assert_str_eq(rg.node_name[rg.nnodes - 1], "1"); /* the sink */
    mp_rgraph_free(&rg);
    ck_assert_int_eq(mp_rgraph_from_json(GRAPHS "VGG16_256_224x224x3_train_nx.json", &rg, &err), 0);
    ck_assert_str_eq(rg.node_name[44], "44");
    ck_assert_int_eq(rg.bytes[0], 3288334336LL);
    ck_assert_double_eq(rg.cost[0], 385);
    mp_rgraph_free(&rg);
}
END_TEST

/* Writes text to a temporary file and loads it; returns the status, the message in err. */
static int load_text(const char *text, mp_rgraph *rg, mp_err *err)
{
    char path[] = "/tmp/test_remat_graph_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    int rc = mp_rgraph_from_json(path, rg, err);
    unlink(path);
    return rc;
}

/* A Checkmate node with id, backward flag and cost_ram given as JSON text. */
#define CM_NODE(id, bw, ram)                                                                                       \
    "{\"id\": " #id ", \"name\": \"n" #id "\", \"backward\": " bw ", \"cost_cpu\": 1, \"cost_ram\": " ram "}"

START_TEST(test_json_errors)
{
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"{\"nodes\": [" CM_NODE(0, "false", "8") ", " CM_NODE(1, "false", "8") "], \"links\": "
         "[{\"source\": 0, \"target\": 1}, {\"source\": 1, \"target\": 0}]}", "cycle"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8") "], \"links\": [{\"source\": 0, \"target\": 0}]}", "cycle"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8") "], \"links\": [{\"source\": 0, \"target\": 7}]}", "dangling"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8") "], \"links\": [{\"source\": 0}]}", "missing field 'target'"},
        {"{\"nodes\": [{\"id\": 0, \"backward\": false, \"cost_cpu\": 1}], \"links\": []}", "missing field 'cost_ram'"},
        {"{\"nodes\": [{\"id\": 0, \"cost_ram\": 1, \"cost_cpu\": 1}], \"links\": []}", "missing field 'backward'"},
        {"{\"nodes\": [" CM_NODE(0, "false", "\"big\"") "], \"links\": []}", "'cost_ram' is not a number"},
        {"{\"nodes\": [" CM_NODE(0, "false", "-8") "], \"links\": []}", "negative"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8.5") "], \"links\": []}", "whole number"},
        {"{\"nodes\": [" CM_NODE(0, "1", "8") "], \"links\": []}", "not true or false"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8") ", " CM_NODE(0, "true", "8") "], \"links\": []}", "two nodes"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8") ", " CM_NODE(1, "false", "8"), "truncated"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8") "], \"links\": [],}", "line 1"},
        {"{\"nodes\": [], \"links\": []}", "no nodes"},
        {"[1, 2, 3]", "not a node-link graph"},
        {"{\"nodes\": [{\"name\": 0, \"out_cost\": 4, \"duration\": 1}], \"links\": []}", "missing field 'param_cost'"},
        {"{\"nodes\": [{\"name\": 0, \"out_cost\": 4, \"duration\": 1, \"param_cost\": 0}], \"links\": [{\"0\": 0, "
         "\"1\": 3}]}", "dangling"},
        {"{\"nodes\": [{\"id\": [], \"backward\": false, \"cost_cpu\": 1, \"cost_ram\": 1}], \"links\": []}",
         "not an integer"},
        {"{\"nodes\": [" CM_NODE(0, "false", "1e400") "], \"links\": []}", "too large"},
        {"{\"nodes\": [" CM_NODE(0, "false", "8") "], \"links\": [], \"x\": \"\\ud800\"}", "surrogate"},
        {"", "end of file"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        mp_rgraph rg;
        mp_err err = {{0}};
        ck_assert_msg(load_text(cases[k].text, &rg, &err) == -1, "case %zu loaded", k);
        ck_assert_msg(strstr(err.msg, cases[k].expect), "case %zu: '%s' lacks '%s'", k, err.msg, cases[k].expect);
        ck_assert_ptr_null(rg.node_name);
    }
    /* deep nesting stops at the depth bound, not the stack */
    size_t n = 100000;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = 0;
    mp_jdoc d;
    mp_err err = {{0}};
    ck_assert_int_eq(mp_jdoc_parse(deep, 2 * n, &d, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "deeply"));
    free(deep);
    /* a valid small graph: file order kept, param_cost a resident value */
    mp_rgraph rg;
    ck_assert_msg(load_text("{\"nodes\": [{\"name\": 5, \"out_cost\": 4, \"duration\": 2.5, \"param_cost\": 100}, "
                            "{\"name\": 3, \"out_cost\": 8, \"duration\": 1, \"param_cost\": 0}], "
                            "\"links\": [{\"0\": 5, \"1\": 3}, {\"0\": 5, \"1\": 3}]}", &rg, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(rg.nnodes, 2);
    ck_assert_int_eq(rg.nvalues, 3);
    ck_assert_str_eq(rg.node_name[0], "5");
    ck_assert_int_eq(rg.producer[2], -1);
    ck_assert_int_eq(rg.bytes[2], 100);
    ck_assert_int_eq(rg.in_off[2] - rg.in_off[1], 1); /* the duplicate link counts once */
    ck_assert_double_eq(rg.cost[0], 2.5);
    mp_rgraph_free(&rg);
}
END_TEST

START_TEST(test_gpu_table)
{
    mp_err err = {{0}};
    const mp_gpu *h = mp_gpu_find("H100", &err);
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(h->name, "h100");
    ck_assert_ptr_null(mp_gpu_find("tpu", &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "a100-80"));
    ck_assert_ptr_nonnull(strstr(err.msg, "t4"));
    for (int i = 0; i < mp_gpu_count; i++) {
        const mp_gpu *x = &mp_gpu_table[i];
        ck_assert(x->memory_bytes > (INT64_C(8) << 30) && x->bandwidth > 1e11 && x->launch_s > 0);
        for (int r = 0; r < MP_RATE_COUNT; r++) ck_assert(x->peak[r] >= x->peak[MP_RATE_FP32]);
    }
    /* a big matmul is compute-bound: twice the work, about twice the time */
    mp_model *mdl = load_step("mlp.onnx", 4096);
    const mp_graph *g = mdl->graph;
    for (int32_t i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i].op_type, "Gemm") || !strcmp(g->nodes[i].op_type, "MatMul")) {
            double f, b;
            mp_cost_node_work(g, i, &f, &b);
            ck_assert(f > 4096.0 * 2 * 10);
            ck_assert(mp_cost_node_seconds(g, i, h) > h->launch_s);
            ck_assert(mp_cost_node_seconds(g, i, mp_gpu_find("t4", &err)) > mp_cost_node_seconds(g, i, h));
        }
    mp_onnx_close(mdl);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remat_graph");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_training_identity_peak);
    tcase_add_test(tc, test_training_pins);
    tcase_add_test(tc, test_training_identity_dropout);
    tcase_add_test(tc, test_json_files);
    tcase_add_test(tc, test_json_errors);
    tcase_add_test(tc, test_gpu_table);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
