/* test_cli.c - the memplan command line, run as a program: help and version,
 * the usage-error contract (exit 2, one stderr line, empty stdout), and
 * `memplan inspect --json` parameter counts against PyTorch's figures
 * (../shared/models/torch/README.md, ../shared/peers/torch-cpu.txt) and
 * against models/README.md. */
#include <check.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/json.c" /* the writer itself, for the escaping tests */
#include "onnx.pb-c.h"  /* onnx__model_proto__unpack: counting Constants independently */
#include "run_memplan.h" /* defines: RUN, run_result, run_free */


/* ---- running the binary ---------------------------------------------------- */


static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- a small JSON reader: validates a document and looks up paths ---------- */

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

/* Skips one string literal; decodes it into out (if out) up to n bytes. NULL if invalid. */
static const char *jstring(const char *p, char *out, size_t n)
{
    size_t k = 0;
    if (*p++ != '"') return NULL;
    while (*p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
                if (out && k < n) out[k++] = '?';
                p += 5;
                continue;
            }
            if (!*p || !strchr("\"\\/bfnrt", *p)) return NULL;
            c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p == 'b' ? '\b' : *p == 'f' ? '\f' : *p;
        }
        if (out && k < n) out[k++] = (char)c;
        p++;
    }
    if (out) out[k < n ? k : n - 1] = 0;
    return p + 1;
}

/* Skips one value (after whitespace); NULL if the text is not valid JSON. */
static const char *jvalue(const char *p, int depth)
{
    p = ws(p);
    if (depth > 64) return NULL;
    if (*p == '"') return jstring(p, NULL, 0);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = jstring(ws(p), NULL, 0))) return NULL;
                p = ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = jvalue(p, depth + 1))) return NULL;
            p = ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    char *end;
    strtod(p, &end);
    return end > p && (*p == '-' || (*p >= '0' && *p <= '9')) ? end : NULL;
}

static bool json_valid(const char *doc)
{
    const char *p = jvalue(doc, 0);
    return p && !*ws(p);
}

/* Finds the value at a dotted path ("parameters.count", "inputs.0.shape.0");
 * returns a pointer to its text or NULL. */
static const char *jget(const char *doc, const char *path)
{
    const char *p = ws(doc);
    char seg[256];
    while (*path) {
        size_t n = strcspn(path, ".");
        snprintf(seg, sizeof seg, "%.*s", (int)n, path);
        path += n + (path[n] == '.');
        if (*p == '{') {
            p = ws(p + 1);
            for (;;) {
                char key[256];
                if (*p != '"') return NULL;
                p = jstring(p, key, sizeof key);
                p = ws(p);
                p = ws(p + 1); /* ':' */
                if (!strcmp(key, seg)) break;
                if (!(p = jvalue(p, 0))) return NULL;
                p = ws(p);
                if (*p++ != ',') return NULL;
                p = ws(p);
            }
        } else if (*p == '[') {
            long idx = strtol(seg, NULL, 10);
            p = ws(p + 1);
            for (long i = 0; i < idx; i++) {
                if (!(p = jvalue(p, 0))) return NULL;
                p = ws(p);
                if (*p++ != ',') return NULL;
                p = ws(p);
            }
            if (*p == ']') return NULL;
        } else {
            return NULL;
        }
    }
    return p;
}

static long long jint(const char *doc, const char *path)
{
    const char *p = jget(doc, path);
    ck_assert_msg(p != NULL, "JSON has no %s", path);
    return strtoll(p, NULL, 10);
}

static bool jstr_is(const char *doc, const char *path, const char *want)
{
    const char *p = jget(doc, path);
    char s[256];
    return p && *p == '"' && jstring(p, s, sizeof s) && !strcmp(s, want);
}

/* The text of the value of top-level member `key` (*len bytes), NULL when absent. */
static const char *jmember(const char *doc, const char *key, size_t *len)
{
    const char *p = jget(doc, key);
    const char *end = p ? jvalue(p, 0) : NULL;
    if (!end) return NULL;
    *len = (size_t)(end - p);
    return p;
}

/* ---- help, version ------------------------------------------------------------ */

START_TEST(help_and_version)
{
    run_result r = RUN("--help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "inspect"));
    ck_assert_int_eq((int)r.errlen, 0);
    run_free(&r);

    r = RUN("--version");
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "memplan 0.1.0\n");
    run_free(&r);

    r = RUN("inspect", "--help");
    ck_assert_int_eq(r.status, 0);
    const char *flags[] = {"--batch", "--dim", "--json", "--params-as-inputs", "--data-inputs", "--buffers", "--no-infer", "--help"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) ck_assert_msg(strstr(r.out, flags[i]), "%s not in help", flags[i]);
    run_free(&r);

    r = RUN("help", "inspect");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: memplan inspect"));
    run_free(&r);
}
END_TEST

/* Every option that `inspect --help` lists is documented in docs/cli.md. */
START_TEST(docs_cover_every_flag)
{
    char *doc = slurp(MEMPLAN_SOURCE "/docs/cli.md", NULL);
    ck_assert_msg(doc != NULL, "docs/cli.md missing");
    run_result r = RUN("inspect", "--help");
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, "\n  --")); p++) {
        char flag[64];
        sscanf(p + 3, "%63s", flag);
        ck_assert_msg(strstr(doc, flag), "docs/cli.md does not mention %s", flag);
        n++;
    }
    ck_assert_int_ge(n, 8);
    run_free(&r);
    free(doc);
}
END_TEST

/* Every top-level field of `inspect --json` is documented in docs/json.md. */
START_TEST(docs_cover_every_json_field)
{
    const char *model = MEMPLAN_SOURCE "/models/cnn_bn.onnx";
    if (!file_exists(model)) {
        printf("skip: %s absent\n", model);
        return;
    }
    char *doc = slurp(MEMPLAN_SOURCE "/docs/json.md", NULL);
    ck_assert_msg(doc != NULL, "docs/json.md missing");
    run_result r = RUN("inspect", model, "--json");
    ck_assert_msg(r.status == 0 && json_valid(r.out), "%s", r.err);
    int n = 0;
    for (const char *p = ws(ws(r.out) + 1); *p == '"'; n++) {
        char key[128], quoted[140];
        p = ws(jstring(p, key, sizeof key));
        snprintf(quoted, sizeof quoted, "`%s`", key);
        ck_assert_msg(strstr(doc, quoted), "docs/json.md does not document %s", key);
        p = ws(jvalue(p + 1, 0));
        if (*p == ',') p = ws(p + 1);
    }
    ck_assert_int_ge(n, 15);
    run_free(&r);
    free(doc);
}
END_TEST

/* ---- usage errors: exit 2, one line "memplan: ..." on stderr, nothing on stdout -- */

static const char *const bad_calls[][8] = {
    {NULL},
    {"frobnicate", NULL},
    {"--frobnicate", NULL},
    {"inspect", NULL},
    {"inspect", "m.onnx", "--batch", NULL},
    {"inspect", "m.onnx", "--batch", "abc", NULL},
    {"inspect", "m.onnx", "--batch", "12x", NULL},
    {"inspect", "m.onnx", "--batch", "-1", NULL},
    {"inspect", "m.onnx", "--batch", "0", NULL},
    {"inspect", "m.onnx", "--batch", "1099511627777", NULL},
    {"inspect", "m.onnx", "--batch", "99999999999999999999999", NULL},
    {"inspect", "m.onnx", "--batch=", NULL},
    {"inspect", "m.onnx", "--batch", "1", "--batch", "2", NULL},
    {"inspect", "--batch", "--json", "m.onnx", NULL},
    {"inspect", "m.onnx", "--dim", NULL},
    {"inspect", "m.onnx", "--dim", "batch", NULL},
    {"inspect", "m.onnx", "--dim", "=3", NULL},
    {"inspect", "m.onnx", "--dim", "seq=-3", NULL},
    {"inspect", "m.onnx", "--dim", "seq=1e3", NULL},
    {"inspect", "m.onnx", "--dim", "seq=2000000000000", NULL},
    {"inspect", "m.onnx", "--dim", "a=1", "--dim", "a=2", NULL},
    {"inspect", "m.onnx", "--json=yes", NULL},
    {"inspect", "m.onnx", "--bogus", NULL},
    {"inspect", "m.onnx", "-x", NULL},
    {"inspect", "m.onnx", "other.onnx", NULL},
    {"inspect", "m.onnx", "--data-inputs", ",", NULL},
    {"inspect", "m.onnx", "--data-inputs", "a", "--data-inputs", "b", NULL},
    {"m.onnx", "--batch", "1", NULL},                 /* the bare form is not there yet */
    {"inspect", "/nonexistent/m.onnx", NULL},        /* model error */
};

START_TEST(bad_calls_exit_2_with_one_line)
{
    const char *const *args = bad_calls[_i];
    run_result r = run_args(args);
    char shown[256] = "";
    for (int k = 0; args[k]; k++) snprintf(shown + strlen(shown), sizeof shown - strlen(shown), " %s", args[k]);
    ck_assert_msg(r.status == 2, "memplan%s: exit %d", shown, r.status);
    ck_assert_msg(r.outlen == 0, "memplan%s: stdout not empty: %s", shown, r.out);
    ck_assert_msg(count_lines(r.err) == 1 && !strncmp(r.err, "memplan: ", 9), "memplan%s: stderr: %s", shown, r.err);
    run_free(&r);
}
END_TEST

/* A file that is not ONNX, and a truncated real model: model errors, no partial output. */
START_TEST(model_errors_exit_2)
{
    char path[] = "/tmp/test_cli_junkXXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert_int_eq(write(fd, "\x0a\xff\xff\xff\xff\x0f junk", 11), 11);
    close(fd);
    run_result r = RUN("inspect", path, "--json");
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq((int)r.outlen, 0);
    ck_assert_int_eq(count_lines(r.err), 1);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "memplan: %s: ", path);
    ck_assert_msg(!strncmp(r.err, prefix, strlen(prefix)), "stderr: %s", r.err);
    run_free(&r);

    const char *model = MEMPLAN_SOURCE "/models/mlp.onnx";
    size_t len;
    char *bytes = slurp(model, &len);
    if (bytes) {
        FILE *f = fopen(path, "wb");
        fwrite(bytes, 1, len / 2, f);
        fclose(f);
        r = RUN("inspect", path);
        ck_assert_int_eq(r.status, 2);
        ck_assert_int_eq((int)r.outlen, 0);
        ck_assert_int_eq(count_lines(r.err), 1);
        run_free(&r);
        free(bytes);

        /* bindings that name nothing are model errors too */
        const char *const calls[][6] = {
            {"inspect", model, "--dim", "nosuch=3", NULL},
            {"inspect", model, "--data-inputs", "nosuch", NULL},
            {"inspect", model, "--buffers", "nosuch", NULL},
        };
        for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
            r = run_args(calls[i]);
            ck_assert_msg(r.status == 2 && r.outlen == 0 && count_lines(r.err) == 1, "%s %s: %d %s", calls[i][2],
                          calls[i][3], r.status, r.err);
            ck_assert_ptr_nonnull(strstr(r.err, "nosuch"));
            run_free(&r);
        }
    }
    unlink(path);
}
END_TEST

/* ---- the JSON writer --------------------------------------------------------- */

START_TEST(json_escapes_every_string)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mp_json j;
    mp_json_init(&j, f, 0);
    mp_json_begin_object(&j);
    mp_json_key(&j, "we\"ird\\key\n");
    mp_json_begin_array(&j);
    mp_json_str(&j, "tab\there\x01\x1f");
    mp_json_str(&j, "caf\xc3\xa9 \xe2\x82\xac");      /* valid UTF-8 stays */
    mp_json_str(&j, "bad\xff\xc3(\xed\xa0\x80");       /* invalid bytes, a surrogate */
    mp_json_str(&j, NULL);
    mp_json_int(&j, INT64_MIN);
    mp_json_num(&j, 0.1);
    mp_json_num(&j, 1.0 / 0.0);
    mp_json_bool(&j, true);
    mp_json_end(&j);
    mp_json_key(&j, "empty");
    mp_json_begin_object(&j);
    mp_json_end(&j);
    mp_json_end(&j);
    ck_assert_int_eq(mp_json_finish(&j), 0);
    fclose(f);
    ck_assert_str_eq(buf, "{\"we\\\"ird\\\\key\\n\":[\"tab\\there\\u0001\\u001f\",\"caf\xc3\xa9 \xe2\x82\xac\","
                          "\"bad\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffd\",null,-9223372036854775808,0.1,null,true],"
                          "\"empty\":{}}\n");
    ck_assert(json_valid(buf));
    free(buf);
}
END_TEST

START_TEST(json_indents_and_keeps_shapes_on_one_line)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mp_json j;
    mp_json_init(&j, f, 2);
    mp_json_begin_object(&j);
    mp_json_key(&j, "shape");
    mp_json_begin_inline_array(&j);
    mp_json_int(&j, 1);
    mp_json_str(&j, "batch");
    mp_json_begin_array(&j); /* nested: stays on the line */
    mp_json_null(&j);
    mp_json_end(&j);
    mp_json_end(&j);
    mp_json_key(&j, "list");
    mp_json_begin_array(&j);
    mp_json_int(&j, 7);
    mp_json_begin_object(&j);
    mp_json_end(&j);
    mp_json_end(&j);
    mp_json_end(&j);
    ck_assert_int_eq(mp_json_finish(&j), 0);
    fclose(f);
    ck_assert_str_eq(buf, "{\n  \"shape\": [1, \"batch\", [null]],\n  \"list\": [\n    7,\n    {}\n  ]\n}\n");
    ck_assert(json_valid(buf));
    free(buf);
}
END_TEST

START_TEST(json_reports_misuse)
{
    FILE *f = fopen("/dev/null", "w");
    mp_json j;
    mp_json_init(&j, f, 2);
    mp_json_begin_object(&j);
    mp_json_int(&j, 1); /* a value where a key is due */
    mp_json_end(&j);
    ck_assert_int_eq(mp_json_finish(&j), -1);

    mp_json_init(&j, f, 2);
    mp_json_begin_array(&j); /* never closed */
    ck_assert_int_eq(mp_json_finish(&j), -1);

    mp_json_init(&j, f, 2);
    for (int i = 0; i < MP_JSON_MAX_DEPTH + 1; i++) mp_json_begin_array(&j);
    for (int i = 0; i < MP_JSON_MAX_DEPTH; i++) mp_json_end(&j);
    ck_assert_int_eq(mp_json_finish(&j), -1);
    fclose(f);
}
END_TEST

/* ---- inspect on real models --------------------------------------------------- */

#define TORCH MEMPLAN_SHARED "/models/torch/"

/* PyTorch's sum(p.numel()) and node counts, from ../shared/models/torch/README.md
 * (param_bytes in ../shared/peers/torch-cpu.txt is 4x these). */
static const struct {
    const char *file;
    long long params, nodes;
    const char *data_inputs; /* _noparams: weights are graph inputs */
    long long buffers_min;   /* at least this many buffer tensors */
} torch_models[] = {
    {"resnet50_train.onnx", 25557032, 175, NULL, 106},
    {"mobilenet_v3_large_train.onnx", 5483032, 189, NULL, 1},
    {"vgg16_train.onnx", 138357544, 44, NULL, 0},
    {"vit_b_16_train.onnx", 86567656, 1772, NULL, 0},
    {"gpt2_small_like_train.onnx", 163037184, 1807, NULL, 1},
    {"resnet50_train_noparams.onnx", 25557032, 175, "input", 106},
    {"vit_b_16_train_noparams.onnx", 86567656, 1562, "input", 0},
};

START_TEST(torch_parameter_counts)
{
    char path[512];
    snprintf(path, sizeof path, TORCH "%s", torch_models[_i].file);
    if (!file_exists(path)) {
        printf("skip: %s absent\n", path);
        return;
    }
    run_result r = torch_models[_i].data_inputs
                       ? RUN("inspect", path, "--json", "--data-inputs", torch_models[_i].data_inputs)
                       : RUN("inspect", path, "--json", "--batch", "1");
    ck_assert_msg(r.status == 0, "%s: exit %d: %s", path, r.status, r.err);
    ck_assert_msg(json_valid(r.out), "%s: invalid JSON", path);
    ck_assert_int_eq(jint(r.out, "parameters.count"), torch_models[_i].params);
    ck_assert_int_eq(jint(r.out, "parameters.bytes"), 4 * torch_models[_i].params);
    ck_assert_int_eq(jint(r.out, "parameters.by_dtype.float32.count"), torch_models[_i].params);
    ck_assert_int_eq(jint(r.out, "parameters.unsized"), 0);
    ck_assert_int_eq(jint(r.out, "nodes"), torch_models[_i].nodes);
    ck_assert_int_ge(jint(r.out, "buffers.tensors"), torch_models[_i].buffers_min);
    ck_assert_int_eq(jint(r.out, "model.ir_version") >= 7, 1);
    ck_assert(jstr_is(r.out, "model.producer", "pytorch"));
    ck_assert(jstr_is(r.out, "inputs.0.name", "input"));
    ck_assert_ptr_null(jget(r.out, "inputs.1")); /* weights are not listed as inputs */
    ck_assert_int_eq(jint(r.out, "inputs.0.shape.0"), torch_models[_i].data_inputs ? 2 : 1);
    ck_assert_ptr_nonnull(jget(r.out, "largest_tensors.9.bytes"));
    ck_assert_int_ge(jint(r.out, "largest_tensors.0.bytes"), jint(r.out, "largest_tensors.9.bytes"));
    run_free(&r);
}
END_TEST

/* Unbound, the batch shows as its symbol; text output uses human units. */
START_TEST(torch_symbols_and_text)
{
    const char *path = TORCH "resnet50_train.onnx";
    if (!file_exists(path)) {
        printf("skip: %s absent\n", path);
        return;
    }
    run_result r = RUN("inspect", path, "--json", "--no-infer");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(jstr_is(r.out, "inputs.0.shape.0", "batch"));
    ck_assert_int_eq(jint(r.out, "inputs.0.shape.1"), 3);
    ck_assert_ptr_nonnull(jget(r.out, "symbols.batch"));
    ck_assert(!strncmp(jget(r.out, "symbols.batch"), "null", 4));
    ck_assert_int_eq(jint(r.out, "ops.BatchNormalization"), 53);
    ck_assert_int_eq(jint(r.out, "buffers.why.batchnorm_running_stats"), 106);
    run_free(&r);

    /* a name given with --buffers is the reason, even for BatchNorm statistics */
    r = RUN("inspect", path, "--json", "--buffers", "bn1.running_mean,fc.bias");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(jint(r.out, "buffers.why.batchnorm_running_stats"), 105);
    ck_assert_int_eq(jint(r.out, "buffers.why.named"), 2);
    ck_assert_int_eq(jint(r.out, "buffers.tensors"), 107);
    ck_assert_int_eq(jint(r.out, "parameters.count"), 25557032 - 1000);
    run_free(&r);

    r = RUN("inspect", path, "--batch", "32");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "25,557,032"));
    ck_assert_ptr_nonnull(strstr(r.out, "97.49 MiB")); /* 102,228,128 bytes */
    ck_assert_ptr_nonnull(strstr(r.out, "float32[32,3,224,224]"));
    ck_assert_ptr_nonnull(strstr(r.out, "batch=32"));
    run_free(&r);

    /* --params-as-inputs needs to know the data inputs when no first dim is symbolic */
    r = RUN("inspect", TORCH "resnet50_train_noparams.onnx", "--params-as-inputs");
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq((int)r.outlen, 0);
    ck_assert_ptr_nonnull(strstr(r.err, "--data-inputs"));
    run_free(&r);
}
END_TEST

/* The causal mask of gpt2_small_like is a registered buffer, cropped to the sequence. */
START_TEST(torch_cropped_mask_is_a_buffer)
{
    const char *path = TORCH "gpt2_small_like_train.onnx";
    if (!file_exists(path)) {
        printf("skip: %s absent\n", path);
        return;
    }
    run_result r = RUN("inspect", path, "--json", "--batch", "1", "--dim", "sequence=512");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(jint(r.out, "buffers.why.cropped_table"), 1);
    ck_assert_int_eq(jint(r.out, "buffers.count"), 1024 * 1024);
    ck_assert_int_eq(jint(r.out, "symbols.sequence"), 512);
    ck_assert_int_eq(jint(r.out, "outputs.0.shape.1"), 512);
    run_free(&r);

    /* --buffers moves more out of the parameters */
    r = RUN("inspect", path, "--json", "--buffers", "pos.weight");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(jint(r.out, "parameters.count"), 163037184 - 1024 * 768);
    ck_assert_int_eq(jint(r.out, "buffers.why.named"), 1);
    run_free(&r);
}
END_TEST

/* Out-of-order nodes are an error unless --topo-sort asks for a sort; subgraph bodies count in nodes_total. */
START_TEST(topo_sort_and_subgraph_counts)
{
    const char *bert = MEMPLAN_SHARED "/models/third-party/ort-transformers/bert_toy_optimized.onnx";
    const char *loop = MEMPLAN_SHARED "/onnx-backend/node/test_loop11/model.onnx";
    if (!file_exists(bert) || !file_exists(loop)) {
        printf("skip: %s or %s absent\n", bert, loop);
        return;
    }
    run_result r = RUN("inspect", bert, "--json");
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(r.outlen, 0);
    ck_assert_msg(strstr(r.err, "--topo-sort") != NULL, "%s", r.err);
    run_free(&r);
    r = RUN("inspect", bert, "--json", "--topo-sort");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(jint(r.out, "nodes"), 384);
    run_free(&r);
    r = RUN("inspect", loop, "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(jint(r.out, "nodes"), 1);
    ck_assert_int_eq(jint(r.out, "nodes_total"), 10);
    run_free(&r);
}
END_TEST

/* memplan's own models, with the parameter counts of models/README.md. */
static const struct {
    const char *file;
    long long params, nodes;
} own_models[] = {
    {"mlp.onnx", 235146, 5},
    {"cnn_bn.onnx", 25626, 10},
    {"gpt_decoder.onnx", 141056, 121},
    {"gpt2_124m.onnx", 124439808, 631},
};

START_TEST(own_model_counts)
{
    char path[512];
    snprintf(path, sizeof path, MEMPLAN_SOURCE "/models/%s", own_models[_i].file);
    if (!file_exists(path)) {
        printf("skip: %s absent\n", path);
        return;
    }
    run_result r = RUN("inspect", path, "--json", "--batch", "2", "--dim", "sequence=64");
    if (r.status == 2 && strstr(r.err, "no symbolic dimension")) { /* a model without a sequence */
        run_free(&r);
        r = RUN("inspect", path, "--json", "--batch", "2");
    }
    ck_assert_msg(r.status == 0, "%s: %s", path, r.err);
    ck_assert_msg(json_valid(r.out), "%s: invalid JSON", path);
    ck_assert_int_eq(jint(r.out, "parameters.count"), own_models[_i].params);
    ck_assert_int_eq(jint(r.out, "nodes"), own_models[_i].nodes);
    ck_assert_int_eq(jint(r.out, "inputs.0.shape.0"), 2);
    ck_assert_int_eq(jint(r.out, "outputs.0.shape.0"), 2);
    ck_assert_int_eq(jint(r.out, "unsized_tensors"), 0);
    run_free(&r);
}
END_TEST

/* The memory command's JSON is inspect's object, member for member (the model as
 * given, not the training step built from it), plus the memory analysis. */
START_TEST(memory_json_extends_inspect)
{
    const char *model = MEMPLAN_SOURCE "/models/mlp.onnx";
    if (!file_exists(model)) {
        printf("skip: %s absent\n", model);
        return;
    }
    run_result in = RUN("inspect", model, "--batch", "4", "--json");
    run_result mem = RUN("memory", model, "--batch", "4", "--json", "--precision", "bf16");
    ck_assert_msg(in.status == 0 && json_valid(in.out), "%s", in.err);
    ck_assert_msg(mem.status == 0 && json_valid(mem.out), "%s", mem.err);
    int n = 0;
    for (const char *p = ws(ws(in.out) + 1); *p == '"'; n++) {
        char key[128];
        p = ws(jstring(p, key, sizeof key));
        p = ws(jvalue(p + 1, 0));
        if (*p == ',') p = ws(p + 1);
        size_t a, b;
        const char *x = jmember(in.out, key, &a), *y = jmember(mem.out, key, &b);
        ck_assert_msg(y != NULL, "memory JSON has no %s", key);
        if (!strcmp(key, "command")) continue;
        ck_assert_msg(a == b && !memcmp(x, y, a), "%s differs: %.*s vs %.*s", key, (int)(a < 200 ? a : 200), x,
                      (int)(b < 200 ? b : 200), y);
    }
    ck_assert_int_eq(n, 17);
    ck_assert(jstr_is(mem.out, "command", "memory"));
    /* the model's dtypes and counts, though the step works in bf16 */
    ck_assert(jstr_is(mem.out, "largest_tensors.0.dtype", "float32"));
    ck_assert_int_eq(jint(mem.out, "nodes"), 5);
    ck_assert_int_gt(jint(mem.out, "step.phases.backward"), 0);
    ck_assert_int_gt(jint(mem.out, "memory.peak_bytes"), jint(mem.out, "parameters.bytes"));
    ck_assert_int_gt(jint(mem.out, "saved_activation_bytes"), 0);
    ck_assert_ptr_null(jget(mem.out, "inputs.1")); /* the step's labels input is not the model's */
    run_free(&in);
    run_free(&mem);
}
END_TEST

/* Every model in ../shared/models imports, infers and gives valid JSON (when it
 * uses ops the table has: an unsupported op must be a clean model error). */
START_TEST(third_party_models_give_valid_json_or_clean_errors)
{
    const char *files[] = {
        "third-party/mnist/model.onnx", "third-party/super_resolution/super_resolution.onnx",
        "third-party/ultraface/version-RFB-320.onnx", "third-party/ppocr-v4/ch_PP-OCRv4_det_infer.onnx",
        "third-party/ppocr-v4/ch_ppocr_mobile_v2.0_cls_infer.onnx", "third-party/ort-transformers/bert_toy_optimized.onnx",
        "third-party/ort-transformers/gpt2_megatron.onnx", "third-party/ort-transformers/gpt2_past.onnx",
        "third-party/ort-training/training_model.onnx", "third-party/ort-training/eval_model.onnx",
        "third-party/ort-training/adamw.onnx",
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[512];
        snprintf(path, sizeof path, MEMPLAN_SHARED "/models/%s", files[i]);
        if (!file_exists(path)) continue;
        run_result r = RUN("inspect", path, "--json");
        if (r.status == 0) {
            ck_assert_msg(json_valid(r.out), "%s: invalid JSON", path);
            ck_assert_int_eq((int)r.errlen, 0);
        } else {
            ck_assert_msg(r.status == 2 && r.outlen == 0 && count_lines(r.err) == 1, "%s: exit %d: %s", path, r.status, r.err);
            printf("note: %s: %s", files[i], r.err);
        }
        run_free(&r);
    }
}
END_TEST

/* PP-OCR (Paddle2ONNX) writes its weights as Constant nodes: without
 * --constants-as-params the model has nothing to train and the error says
 * which flag trains it; with it, the float Constants of 2+ elements, counted
 * here from the protobuf itself, are the parameters and buffers. */
START_TEST(constants_as_params)
{
    const char *path = MEMPLAN_SHARED "/models/third-party/ppocr-v4/ch_ppocr_mobile_v2.0_cls_infer.onnx";
    if (!file_exists(path)) {
        printf("skip: %s absent\n", path);
        return;
    }
    size_t n;
    char *bytes = slurp(path, &n);
    ck_assert_ptr_nonnull(bytes);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, (const uint8_t *)bytes);
    ck_assert_ptr_nonnull(m);
    long long want = 0;
    for (size_t i = 0; i < m->graph->n_node; i++) {
        const Onnx__NodeProto *nd = m->graph->node[i];
        if (strcmp(nd->op_type, "Constant") || nd->n_attribute != 1 || !nd->attribute[0]->t) continue;
        const Onnx__TensorProto *t = nd->attribute[0]->t;
        long long numel = 1;
        for (size_t d = 0; d < t->n_dims; d++) numel *= t->dims[d];
        if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && numel >= 2) want += numel;
    }
    onnx__model_proto__free_unpacked(m, NULL);
    free(bytes);
    ck_assert_int_gt(want, 0);

    const char *dims[] = {"--dim", "p2o.DynamicDimension.1=48", "--dim", "p2o.DynamicDimension.2=192"};
    run_result r = RUN(path, "--batch", "2", dims[0], dims[1], dims[2], dims[3]);
    ck_assert_msg(r.status == 2 && r.outlen == 0 && count_lines(r.err) == 1, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "--constants-as-params"));
    run_free(&r);

    r = RUN("inspect", path, "--json", "--constants-as-params");
    ck_assert_msg(r.status == 0, "%s", r.err);
    long long params = jint(r.out, "parameters.count"), buffers = jint(r.out, "buffers.count");
    ck_assert_int_gt(params, 0);
    ck_assert_int_gt(buffers, 0); /* BatchNorm statistics */
    ck_assert_int_eq(params + buffers, want);
    run_free(&r);

    r = RUN(path, "--batch", "2", dims[0], dims[1], dims[2], dims[3], "--constants-as-params", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(jint(r.out, "memory.totals.gradients"), 4 * params); /* one fp32 gradient per parameter */
    run_free(&r);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *t = tcase_create("cli");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, help_and_version);
    tcase_add_test(t, docs_cover_every_flag);
    tcase_add_test(t, docs_cover_every_json_field);
    tcase_add_loop_test(t, bad_calls_exit_2_with_one_line, 0, (int)(sizeof bad_calls / sizeof *bad_calls));
    tcase_add_test(t, model_errors_exit_2);
    tcase_add_test(t, json_escapes_every_string);
    tcase_add_test(t, json_indents_and_keeps_shapes_on_one_line);
    tcase_add_test(t, json_reports_misuse);
    tcase_add_loop_test(t, torch_parameter_counts, 0, (int)(sizeof torch_models / sizeof *torch_models));
    tcase_add_test(t, torch_symbols_and_text);
    tcase_add_test(t, torch_cropped_mask_is_a_buffer);
    tcase_add_test(t, topo_sort_and_subgraph_counts);
    tcase_add_test(t, memory_json_extends_inspect);
    tcase_add_loop_test(t, own_model_counts, 0, (int)(sizeof own_models / sizeof *own_models));
    tcase_add_test(t, third_party_models_give_valid_json_or_clean_errors);
    tcase_add_test(t, constants_as_params);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
