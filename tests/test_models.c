/* test_models.c - memplan-models rebuilds the committed models/ byte for byte, and each
 * model has the structure, inputs and parameter count that models/README.md states. */
#include <check.h>
#include <dirent.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "onnx.pb-c.h"  /* onnx__model_proto__unpack */

static const char *const model_files[] = {"mlp.onnx", "cnn_bn.onnx", "gpt_decoder.onnx", "gpt2_124m.onnx"};
enum { N_MODELS = sizeof model_files / sizeof model_files[0] };

static char out_dir[4096];  /* where the builder wrote this run's models */

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Runs <dir of MEMPLAN_BIN>/memplan-models into a fresh temporary directory, once. */
static void build_models_once(void)
{
    if (out_dir[0]) return;
    char bin[4096];
    snprintf(bin, sizeof bin, "%s", MEMPLAN_BIN);
    char builder[4096 + 32];
    snprintf(builder, sizeof builder, "%s/memplan-models", dirname(bin));
    ck_assert_msg(access(builder, X_OK) == 0, "%s missing: build the memplan-models target", builder);

    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/memplan-models-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(out_dir));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl(builder, builder, out_dir, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "memplan-models failed (status %d)", status);
}

static void remove_out_dir(void)
{
    if (!out_dir[0]) return;
    DIR *d = opendir(out_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[4096 + 256];
        snprintf(p, sizeof p, "%s/%s", out_dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(out_dir);
}

static Onnx__ModelProto *load_built(const char *file, size_t *size)
{
    build_models_once();
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s", out_dir, file);
    unsigned char *buf = read_all(path, size);
    ck_assert_msg(buf, "cannot read %s", path);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, *size, buf);
    free(buf);
    ck_assert_msg(m, "%s does not unpack as a ModelProto", file);
    ck_assert_ptr_nonnull(m->graph);
    return m;
}

/* ---- facts about a model ------------------------------------------------- */

static int count_op(const Onnx__GraphProto *g, const char *op)
{
    int n = 0;
    for (size_t i = 0; i < g->n_node; i++) n += !strcmp(g->node[i]->op_type, op);
    return n;
}

static int64_t elements(const Onnx__TensorProto *t)
{
    int64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) n *= t->dims[i];
    return n;
}

static int64_t param_count(const Onnx__GraphProto *g)
{
    int64_t n = 0;
    for (size_t i = 0; i < g->n_initializer; i++) n += elements(g->initializer[i]);
    return n;
}

static bool is_name_in(const char *name, char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

/* Header fields, unique node names, and every node input defined before its use. */
static void check_well_formed(const Onnx__ModelProto *m)
{
    ck_assert_int_eq(m->ir_version, 8);
    ck_assert_uint_eq(m->n_opset_import, 1);
    ck_assert_int_eq(m->opset_import[0]->version, 17);
    ck_assert_str_eq(m->producer_name, "memplan-models");
    const Onnx__GraphProto *g = m->graph;
    size_t cap = g->n_input + g->n_initializer + 4 * g->n_node, n = 0;
    char **defined = malloc(cap * sizeof *defined);
    for (size_t i = 0; i < g->n_input; i++) defined[n++] = g->input[i]->name;
    for (size_t i = 0; i < g->n_initializer; i++) defined[n++] = g->initializer[i]->name;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *node = g->node[i];
        for (size_t j = 0; j < i; j++) ck_assert_str_ne(g->node[j]->name, node->name);
        for (size_t k = 0; k < node->n_input; k++)
            ck_assert_msg(is_name_in(node->input[k], defined, n), "%s: input %s used before it is defined",
                          node->name, node->input[k]);
        for (size_t k = 0; k < node->n_output && n < cap; k++) defined[n++] = node->output[k];
    }
    for (size_t i = 0; i < g->n_output; i++) ck_assert(is_name_in(g->output[i]->name, defined, n));
    free(defined);
}

/* The graph's one input is `name` with dims given as "batch" / "784". */
static void check_io(const Onnx__ValueInfoProto *v, const char *name, int elem, int rank, const char *const *dims)
{
    ck_assert_str_eq(v->name, name);
    ck_assert_int_eq(v->type->value_case, ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE);
    const Onnx__TypeProto__Tensor *t = v->type->tensor_type;
    ck_assert_int_eq(t->elem_type, elem);
    ck_assert_uint_eq(t->shape->n_dim, (size_t)rank);
    for (int i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = t->shape->dim[i];
        char got[32];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            snprintf(got, sizeof got, "%s", d->dim_param);
        else
            snprintf(got, sizeof got, "%lld", (long long)d->dim_value);
        ck_assert_str_eq(got, dims[i]);
    }
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(rebuild_is_byte_identical)
{
    build_models_once();
    for (int i = 0; i < N_MODELS; i++) {
        char built[4096 + 64], committed[4096 + 64];
        snprintf(built, sizeof built, "%s/%s", out_dir, model_files[i]);
        snprintf(committed, sizeof committed, "%s/models/%s", MEMPLAN_SOURCE, model_files[i]);
        size_t n1 = 0, n2 = 0;
        unsigned char *a = read_all(built, &n1), *b = read_all(committed, &n2);
        ck_assert_msg(a && b, "cannot read %s or %s", built, committed);
        ck_assert_msg(n1 == n2 && !memcmp(a, b, n1),
                      "%s differs from the committed file: regenerate with build/memplan-models models/",
                      model_files[i]);
        ck_assert_msg(n1 < 1536 * 1024, "%s is %zu bytes: too big to commit", model_files[i], n1);
        free(a);
        free(b);
    }
}
END_TEST

START_TEST(mlp_structure)
{
    size_t size;
    Onnx__ModelProto *m = load_built("mlp.onnx", &size);
    const Onnx__GraphProto *g = m->graph;
    check_well_formed(m);
    ck_assert_uint_eq(g->n_node, 5);
    ck_assert_int_eq(count_op(g, "Gemm"), 3);
    ck_assert_int_eq(count_op(g, "Relu"), 2);
    ck_assert_uint_eq(g->n_input, 1);
    check_io(g->input[0], "input", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (const char *[]){"batch", "784"});
    check_io(g->output[0], "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (const char *[]){"batch", "10"});
    ck_assert_int_eq(param_count(g), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    ck_assert_int_eq(param_count(g), 235146);
    /* real (nonzero) inline weights */
    const Onnx__TensorProto *w = g->initializer[0];
    ck_assert_str_eq(w->name, "fc1.weight");
    ck_assert_uint_eq(w->raw_data.len, 4 * 784 * 256);
    ck_assert(memcmp(w->raw_data.data, (char[16]){0}, 16) != 0);
    onnx__model_proto__free_unpacked(m, NULL);
}
END_TEST

START_TEST(cnn_bn_structure)
{
    size_t size;
    Onnx__ModelProto *m = load_built("cnn_bn.onnx", &size);
    const Onnx__GraphProto *g = m->graph;
    check_well_formed(m);
    ck_assert_uint_eq(g->n_node, 10);
    ck_assert_int_eq(count_op(g, "Conv"), 2);
    ck_assert_int_eq(count_op(g, "BatchNormalization"), 2);
    ck_assert_int_eq(count_op(g, "MaxPool"), 2);
    ck_assert_int_eq(count_op(g, "Flatten"), 1);
    ck_assert_str_eq(g->node[1]->op_type, "BatchNormalization");
    ck_assert_uint_eq(g->node[1]->n_input, 5);   /* scale, bias, mean, var initializers */
    ck_assert_uint_eq(g->node[1]->n_output, 3);  /* training mode: running stats out */
    check_io(g->input[0], "input", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4,
             (const char *[]){"batch", "3", "32", "32"});
    check_io(g->output[0], "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (const char *[]){"batch", "10"});
    int64_t conv = 16 * 3 * 9 + 32 * 16 * 9, bn = 4 * (16 + 32), fc = 32 * 8 * 8 * 10 + 10;
    ck_assert_int_eq(param_count(g), conv + bn + fc);
    ck_assert_int_eq(param_count(g), 25722);
    onnx__model_proto__free_unpacked(m, NULL);
}
END_TEST

/* nodes and parameters of the GPT builder as functions of its shape */
static void check_gpt(const char *file, int layers, int64_t c, int64_t vocab, int64_t context, int64_t params)
{
    size_t size;
    Onnx__ModelProto *m = load_built(file, &size);
    const Onnx__GraphProto *g = m->graph;
    check_well_formed(m);
    ck_assert_uint_eq(g->n_node, 19 + 51 * (size_t)layers);
    ck_assert_int_eq(count_op(g, "LayerNormalization"), 2 * layers + 1);
    ck_assert_int_eq(count_op(g, "MatMul"), 6 * layers + 1);
    ck_assert_int_eq(count_op(g, "Softmax"), layers);
    ck_assert_int_eq(count_op(g, "Erf"), layers);
    ck_assert_int_eq(count_op(g, "Where"), layers);
    ck_assert_int_eq(count_op(g, "Reshape"), 4 * layers);
    ck_assert_int_eq(count_op(g, "Trilu"), 1);
    ck_assert_int_eq(count_op(g, "Range"), 1);
    ck_assert_uint_eq(g->n_input, 1);
    check_io(g->input[0], "input", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, (const char *[]){"batch", "sequence"});
    char v[24];
    snprintf(v, sizeof v, "%lld", (long long)vocab);
    check_io(g->output[0], "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (const char *[]){"batch", "sequence", v});
    /* embeddings + per block (2 LayerNorms, qkv, proj, fc, proj) + final LayerNorm; tied head */
    int64_t per_block = 4 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c);
    ck_assert_int_eq(param_count(g), vocab * c + context * c + layers * per_block + 2 * c);
    ck_assert_int_eq(param_count(g), params);
    onnx__model_proto__free_unpacked(m, NULL);
}

START_TEST(gpt_decoder_structure)
{
    check_gpt("gpt_decoder.onnx", 2, 64, 512, 128, 141056);
}
END_TEST

START_TEST(gpt2_124m_structure)
{
    check_gpt("gpt2_124m.onnx", 12, 768, 50257, 1024, 124439808);
}
END_TEST

/* Every initializer of 4 KiB or more is external, back to back in a file that is not written. */
START_TEST(gpt2_124m_external_data)
{
    size_t size;
    Onnx__ModelProto *m = load_built("gpt2_124m.onnx", &size);
    ck_assert_uint_lt(size, 1024 * 1024);
    const Onnx__GraphProto *g = m->graph;
    int64_t offset = 0;
    int external = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        int64_t bytes = 4 * elements(t);
        ck_assert_int_eq(t->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
        if (bytes < 4096) {
            ck_assert_int_eq(t->data_location, ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT);
            ck_assert_uint_eq(t->raw_data.len, (size_t)bytes);
            continue;
        }
        external++;
        ck_assert_int_eq(t->data_location, ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
        ck_assert_uint_eq(t->raw_data.len, 0);
        ck_assert_uint_eq(t->n_external_data, 3);
        ck_assert_str_eq(t->external_data[0]->key, "location");
        ck_assert_str_eq(t->external_data[0]->value, "gpt2_124m.weights");
        ck_assert_str_eq(t->external_data[1]->key, "offset");
        ck_assert_int_eq(strtoll(t->external_data[1]->value, NULL, 10), offset);
        ck_assert_str_eq(t->external_data[2]->key, "length");
        ck_assert_int_eq(strtoll(t->external_data[2]->value, NULL, 10), bytes);
        offset += bytes;
    }
    /* external: wte, wpe, and per block c_attn w+b, attn c_proj w, c_fc w+b, mlp c_proj w;
     * inline: the 768-float LayerNorm weights and biases and the two 768-float biases per block */
    ck_assert_int_eq(external, 2 + 12 * 6);
    ck_assert_int_eq(offset, 4 * (124439808 - (12 * 6 + 2) * 768));
    char weights[4096 + 64];
    snprintf(weights, sizeof weights, "%s/gpt2_124m.weights", out_dir);
    ck_assert_int_ne(access(weights, F_OK), 0);
    onnx__model_proto__free_unpacked(m, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, rebuild_is_byte_identical);
    tcase_add_test(tc, mlp_structure);
    tcase_add_test(tc, cnn_bn_structure);
    tcase_add_test(tc, gpt_decoder_structure);
    tcase_add_test(tc, gpt2_124m_structure);
    tcase_add_test(tc, gpt2_124m_external_data);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    /* build once in this process and share the output between the tests */
    srunner_set_fork_status(r, CK_NOFORK);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    remove_out_dir();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
