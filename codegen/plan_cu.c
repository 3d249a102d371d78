/* plan_cu.c - OUT/plan.cu and OUT/Makefile: the plan as CUDA C. The tensor
 * table (offsets, shapes) and the instruction stream are static tables that
 * runtime/cuda/memplan_cuda.cu runs in one cudaMalloc of the arena. An op the
 * CUDA runtime has no kernel for (or a case of it) fails codegen naming the
 * op and the node: nothing is ever skipped silently. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/plan.h"
#include "runtime/cuda/memplan_cuda.h"
#include "runtime/kernels.h" /* mp_elem_size */

/* The op table: ONNX/training op -> CUDA runtime op. */
static const struct {
    const char *op_type;
    int code;
} cu_ops[] = {
    {"Constant", MP_CU_CONSTANT},
    {"Gemm", MP_CU_GEMM},
    {"Relu", MP_CU_RELU},
    {"ReluGrad", MP_CU_RELU_GRAD},
    {"SoftmaxCrossEntropyLoss", MP_CU_SCE_LOSS},
    {"SoftmaxCrossEntropyGrad", MP_CU_SCE_GRAD},
    {"SumToShape", MP_CU_SUM_TO_SHAPE},
    {"AdamUpdate", MP_CU_ADAM},
};

static const mp_value *in_val(const mp_graph *g, const mp_node *n, int k)
{
    return k < n->nin && n->in[k] >= 0 ? &g->values[n->in[k]] : NULL;
}

/* Why the runtime's kernel cannot run this node, or NULL when it can. */
static const char *unsupported_case(const mp_graph *g, const mp_node *n, int code)
{
    for (int k = 0; k < n->nin; k++) {
        const mp_value *v = in_val(g, n, k);
        if (v && v->dtype != MP_FLOAT && v->dtype != MP_INT64) return "a dtype other than float32/int64";
    }
    for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0 && g->values[n->out[k]].dtype != MP_FLOAT && g->values[n->out[k]].dtype != MP_INT64)
            return "a dtype other than float32/int64";
    const mp_value *x = in_val(g, n, 0);
    switch (code) {
    case MP_CU_CONSTANT:
        return n->nout == 1 && g->values[n->out[0]].konst && g->values[n->out[0]].konst->data ? NULL : "no folded value";
    case MP_CU_GEMM:
        if (!x || x->rank != 2 || !in_val(g, n, 1) || in_val(g, n, 1)->rank != 2) return "operands of rank other than 2";
        if (in_val(g, n, 2) && in_val(g, n, 2)->rank > 2) return "a bias of rank > 2";
        return NULL;
    case MP_CU_SCE_LOSS:
    case MP_CU_SCE_GRAD: {
        const mp_value *s = code == MP_CU_SCE_LOSS ? x : in_val(g, n, 1), *lab = in_val(g, n, code == MP_CU_SCE_LOSS ? 1 : 2);
        const char *red = mp_attr_str(n, "reduction", "mean");
        if (!s || s->rank != 2 || !lab || lab->dtype != MP_INT64) return "scores of rank other than 2";
        if (in_val(g, n, code == MP_CU_SCE_LOSS ? 2 : 3) || mp_node_attr(n, "ignore_index")) return "class weights or ignore_index";
        if (strcmp(red, "mean")) return "a reduction other than mean";
        if (code == MP_CU_SCE_LOSS && (n->nout < 2 || n->out[1] < 0)) return "no log_prob output";
        return NULL;
    }
    case MP_CU_ADAM: return n->nin == 5 && n->nout == 4 ? NULL : "not (param, grad, m, v, step)";
    default: return x ? NULL : "no input";
    }
}

static void put_cstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) fprintf(f, "\\%03o", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void put_bytes(FILE *f, const char *name, int32_t id, const mp_tensor *t)
{
    size_t n = (size_t)t->numel * mp_elem_size(t->dtype);
    fprintf(f, "static const unsigned char %s%d[] = {", name, id);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%u", !i ? "\n    " : i % 24 ? "," : ",\n    ", ((const unsigned char *)t->data)[i]);
    fprintf(f, "%s};\n", n ? "\n" : "0");
}

/* runtime/cuda, next to this file's directory in the source tree. */
static void cuda_dir(char *buf, size_t n)
{
    char here[PATH_MAX];
    snprintf(here, sizeof here, "%s", __FILE__);
    char *cut = strstr(here, "codegen/plan_cu.c");
    if (cut) *cut = 0;
    char abs[PATH_MAX];
    if (!realpath(*here ? here : ".", abs)) snprintf(abs, sizeof abs, ".");
    snprintf(buf, n, "%s/runtime/cuda", abs);
}

int mp_plan_write_cuda(const char *dir, const mp_graph *g, const mp_schedule *s, const int64_t *offsets,
                       const mp_plan_info *info, mp_err *err)
{
    /* every instruction must have a kernel before anything is written */
    int *code = malloc((size_t)(s->n + 1) * sizeof *code);
    int32_t *tix = malloc((size_t)(g->nvalues + 1) * sizeof *tix);
    if (!code || !tix) {
        free(code);
        free(tix);
        return mp_fail(err, "out of memory");
    }
    int rc = -1;
    FILE *f = NULL;
    char tmp[PATH_MAX], path[PATH_MAX];
    for (int32_t i = 0; i < s->n; i++) {
        const mp_node *n = &g->nodes[s->order[i]];
        code[i] = -1;
        for (size_t k = 0; k < sizeof cu_ops / sizeof *cu_ops; k++)
            if (!strcmp(cu_ops[k].op_type, n->op_type)) code[i] = cu_ops[k].code;
        /* an op whose outputs are all folded (Shape, Range of constants) is a constant */
        bool folded = n->nout == 1 && n->out[0] >= 0 && g->values[n->out[0]].konst && g->values[n->out[0]].konst->data;
        if (code[i] < 0 && folded) code[i] = MP_CU_CONSTANT;
        if (code[i] < 0) {
            mp_fail(err, "plan.cu: op %s (node '%s') has no CUDA kernel", n->op_type, n->name);
            goto done;
        }
        const char *why = unsupported_case(g, n, code[i]);
        if (why) {
            mp_fail(err, "plan.cu: op %s (node '%s'): the CUDA kernel does not support %s", n->op_type, n->name, why);
            goto done;
        }
    }
    int32_t nt = 0, loss = -1;
    for (int32_t v = 0; v < g->nvalues; v++) tix[v] = offsets[v] >= 0 ? nt++ : -1;
    if (g->noutputs > 0 && g->outputs[0] >= 0) loss = tix[g->outputs[0]];
    if (loss < 0) {
        mp_fail(err, "plan.cu: the step has no loss in the arena");
        goto done;
    }
    snprintf(path, sizeof path, "%s/plan.cu", dir);
    snprintf(tmp, sizeof tmp, "%s/.plan.cu.%ld.tmp", dir, (long)getpid());
    if (!(f = fopen(tmp, "w"))) {
        mp_fail(err, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    fprintf(f, "/* plan.cu - written by memplan (codegen/plan_cu.c); build with make. */\n#include \"memplan_cuda.h\"\n\n");
    for (int32_t v = 0; v < g->nvalues; v++)
        if (tix[v] >= 0 && g->values[v].producer < 0 && g->values[v].konst && g->values[v].konst->data)
            put_bytes(f, "data_", v, g->values[v].konst);
    for (int32_t i = 0; i < s->n; i++)
        if (code[i] == MP_CU_CONSTANT) put_bytes(f, "konst_", i, g->values[g->nodes[s->order[i]].out[0]].konst);
    fprintf(f, "\nstatic const mp_cu_tensor tensors[] = {\n");
    for (int32_t v = 0; v < g->nvalues; v++) {
        if (tix[v] < 0) continue;
        const mp_value *val = &g->values[v];
        int64_t numel = 1;
        for (int a = 0; a < val->rank; a++) numel *= val->dims[a].v;
        size_t nlen = strlen(val->name);
        bool master = nlen > 7 && !strcmp(val->name + nlen - 7, ".master");
        int init = val->producer >= 0 ? 0 : val->konst && val->konst->data ? 3
                   : val->role == MP_ROLE_OPT_STATE && !master ? 2 : 1;
        fprintf(f, "    {");
        put_cstr(f, val->name);
        fprintf(f, ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %d, %d, {", offsets[v], val->bytes, numel,
                val->dtype == MP_INT64 ? MP_CU_I64 : MP_CU_F32, val->rank);
        for (int a = 0; a < val->rank; a++) fprintf(f, "%s%" PRId64, a ? ", " : "", val->dims[a].v);
        fprintf(f, "}, %d, ", init);
        if (init == 3) fprintf(f, "data_%d},\n", v);
        else fprintf(f, "0},\n");
    }
    fprintf(f, "};\n\nstatic const mp_cu_instr instrs[] = {\n");
    for (int32_t i = 0; i < s->n; i++) {
        const mp_node *n = &g->nodes[s->order[i]];
        double fa[6] = {0};
        int64_t ia[2] = {0};
        if (code[i] == MP_CU_GEMM) {
            fa[0] = mp_attr_float(n, "alpha", 1.0f), fa[1] = mp_attr_float(n, "beta", 1.0f);
            ia[0] = mp_attr_int(n, "transA", 0), ia[1] = mp_attr_int(n, "transB", 0);
        } else if (code[i] == MP_CU_ADAM) {
            fa[0] = mp_attr_float(n, "lr", 1e-3f), fa[1] = mp_attr_float(n, "beta1", 0.9f);
            fa[2] = mp_attr_float(n, "beta2", 0.999f), fa[3] = mp_attr_float(n, "epsilon", 1e-8f);
            fa[4] = mp_attr_float(n, "weight_decay", 0.0f), fa[5] = mp_attr_float(n, "loss_scale", 1.0f);
        }
        fprintf(f, "    {%d, ", code[i]);
        put_cstr(f, n->name);
        int nin = n->nin < 6 ? n->nin : 6, nout = n->nout < 4 ? n->nout : 4;
        fprintf(f, ", %d, %d, {", nin, nout);
        for (int k = 0; k < nin; k++) fprintf(f, "%s%d", k ? ", " : "", n->in[k] >= 0 ? tix[n->in[k]] : -1);
        fprintf(f, "%s}, {", nin ? "" : "-1");
        for (int k = 0; k < nout; k++) fprintf(f, "%s%d", k ? ", " : "", n->out[k] >= 0 ? tix[n->out[k]] : -1);
        fprintf(f, "%s}, {", nout ? "" : "-1");
        for (int k = 0; k < 6; k++) fprintf(f, "%s%.17g", k ? ", " : "", fa[k]);
        fprintf(f, "}, {%" PRId64 ", %" PRId64 "}, ", ia[0], ia[1]);
        if (code[i] == MP_CU_CONSTANT) fprintf(f, "konst_%d},\n", i);
        else fprintf(f, "0},\n");
    }
    fprintf(f, "};\n\nstatic const mp_cu_plan plan = {%" PRId64 ", %" PRId64 ", %d, %d, %d, tensors, instrs};\n\n",
            info->arena_bytes, info->lower_bound, nt, s->n, loss);
    fprintf(f, "int main(int argc, char **argv) { return mp_cu_main(argc, argv, &plan); }\n");
    bool bad = ferror(f) != 0;
    if (fclose(f) || bad || rename(tmp, path)) {
        f = NULL;
        remove(tmp);
        mp_fail(err, "%s: write error", path);
        goto done;
    }
    f = NULL;
    char cdir[PATH_MAX + 32], mk[PATH_MAX + 32];
    cuda_dir(cdir, sizeof cdir);
    snprintf(mk, sizeof mk, "%s/Makefile", dir);
    if (!(f = fopen(mk, "w"))) {
        mp_fail(err, "%s: %s", mk, strerror(errno));
        goto done;
    }
    fprintf(f, "# written by memplan: make builds ./plan, the executable plan (plan.cu)\n"
               "MEMPLAN_CUDA ?= %s\nNVCC ?= nvcc\nNVCCFLAGS ?= -O2\n\n"
               "plan: plan.cu $(MEMPLAN_CUDA)/memplan_cuda.cu $(MEMPLAN_CUDA)/memplan_cuda.h\n"
               "\t$(NVCC) $(NVCCFLAGS) -I$(MEMPLAN_CUDA) -o $@ plan.cu $(MEMPLAN_CUDA)/memplan_cuda.cu -lcublas\n\n"
               "clean:\n\trm -f plan\n", cdir);
    bad = ferror(f) != 0;
    if (fclose(f) || bad) {
        f = NULL;
        mp_fail(err, "%s: write error", mk);
        goto done;
    }
    f = NULL;
    rc = 0;
done:
    if (f) {
        fclose(f);
        remove(tmp);
    }
    free(code);
    free(tix);
    return rc;
}
