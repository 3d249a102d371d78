#!/bin/sh
# models_bench.sh - the plan is true on every model of ../shared/models: for each
# model and budget, memplan plans the training step with -o, and memplan-run runs
# the written plan on the CPU for one step. The table gives the planned peak, the
# arena (every tensor at a fixed offset), the live-bytes lower bound, their ratio,
# and the peak memplan-run measured in its one arena (it must equal the arena).
#
#   bench/models_bench.sh [BUILD_DIR] [ZOO_DIR]
#
# ZOO_DIR (bench/export_models.py OUT --zoo writes OUT/zoo): also each model
# listed in ZOO_DIR/options.txt, with its options, at 70 %.
#
# EXTRA_OPTS (environment) is added to every row's options, e.g.
# EXTRA_OPTS=--optimizer-in-backward bench/models_bench.sh build.
#
# A budget below the smallest feasible one is replaced by that one (exit 3
# states it), so every model gets a row. Needs python3 only to read the JSON
# (any python3). Skips what is absent; says why a model has no row.
set -u
BUILD=${1:-build}
ZOO=${2:-}
M="$BUILD/memplan"
RUN="$BUILD/memplan-run"
S="$(dirname "$0")/../../shared/models"
OUT=$(mktemp -d /tmp/models_bench.XXXXXX)
[ -x "$M" ] && [ -x "$RUN" ] || { echo "models_bench: build first ($M, $RUN)"; exit 1; }

echo "| model | options | budget | planned peak | arena | lower bound | arena / bound | measured peak | = arena | plan + run s |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---|---:|"
row() { # model (under ../shared/models, or an absolute path), budget, options...
    model=$1 budget=$2
    shift 2
    # shellcheck disable=SC2086 # the options are words
    set -- "$@" ${EXTRA_OPTS:-}
    case $model in /*) file=$model ;; *) file=$S/$model ;; esac
    [ -f "$file" ] || { echo "| $model | absent | | | | | | | | |"; return; }
    rm -rf "$OUT/plan"
    t0=$(date +%s.%N)
    timeout 300 "$M" "$file" "$@" --budget "$budget" --reserve 0 --json -o "$OUT/plan" >"$OUT/plan.json" 2>"$OUT/plan.err"
    rc=$?
    if [ $rc -eq 3 ]; then # below the smallest feasible budget: plan at that one (a range's top is feasible)
        least=$(sed -n 's/.*smallest feasible budget is \([0-9]*\) bytes.*/\1/p; s/.*smallest feasible budget lies between [0-9]* and \([0-9]*\) bytes.*/\1/p' "$OUT/plan.err" | head -1)
        if [ -n "$least" ]; then
            budget="$budget: ${least}B (smallest)"
            timeout 300 "$M" "$file" "$@" --budget "${least}B" --reserve 0 --json -o "$OUT/plan" >"$OUT/plan.json" 2>"$OUT/plan.err"
            rc=$?
        fi
    fi
    if [ ! -f "$OUT/plan/plan.json" ]; then
        echo "| $model | $* | $budget | $(grep -v '^plan:' "$OUT/plan.err" | head -1 | cut -c1-160 | tr '|' '/') | | | | | | |"
        return
    fi
    timeout 600 "$RUN" "$OUT/plan" --steps 1 --json >"$OUT/run.json" 2>"$OUT/run.err"
    t1=$(date +%s.%N)
    python3 - "$model" "$*" "$budget" "$(echo "$t1 - $t0" | bc)" "$OUT/plan.json" "$OUT/run.json" "$rc" <<'EOF'
import json, sys
model, opts, budget, secs, plan_path, run_path, rc = sys.argv[1:]
p = json.load(open(plan_path))["plan"]
try:
    run = json.load(open(run_path)); measured = run["measured_peak_bytes"]
except Exception:
    measured = None
mib = lambda b: "%.2f MiB" % (b / 2**20)
a, lb = p["arena_bytes"], p["arena_lower_bound_bytes"]
print("| %s | %s | %s | %s | %d | %d | %.4f | %s | %s | %.1f |" % (
    model.split("/")[-1], opts, budget, mib(p["peak_bytes"]), a, lb, a / lb,
    measured if measured is not None else "run failed", "yes" if measured == a else "NO", float(secs)))
EOF
}

for b in 100% 70%; do
    row third-party/mnist/model.onnx $b
    row third-party/super_resolution/super_resolution.onnx $b --batch 2
    row third-party/ultraface/version-RFB-320.onnx $b
    row third-party/ort-transformers/gpt2_megatron.onnx $b --batch 2 --dim seq_len=64 --dim past_seq_len=0 --dim total_seq_len=64
    row third-party/ort-transformers/bert_toy_optimized.onnx $b --topo-sort --batch 2 --dim max_seq_len_in_batch=16
    row third-party/ort-training/eval_model.onnx $b --batch 4 --dim input-0_dim1=784 --params-as-inputs
    row third-party/ppocr-v4/ch_ppocr_mobile_v2.0_cls_infer.onnx $b --batch 2 --dim p2o.DynamicDimension.1=48 --dim p2o.DynamicDimension.2=192 --constants-as-params
    row third-party/ppocr-v4/ch_PP-OCRv4_det_infer.onnx $b --batch 2 --dim p2o.DynamicDimension.1=320 --dim p2o.DynamicDimension.2=320 --constants-as-params
    for m in resnet50 vgg16 mobilenet_v3_large vit_b_16; do
        row torch/$m.onnx $b --batch 2
        row torch/${m}_train.onnx $b --batch 2
    done
    row torch/resnet50_train_noparams.onnx $b --data-inputs input
    row torch/vit_b_16_train_noparams.onnx $b --data-inputs input
    row torch/gpt2_small_like.onnx $b --batch 1 --dim sequence=128
    row torch/gpt2_small_like_train.onnx $b --batch 1 --dim sequence=128
done
# Not planned: ort-training/training_model.onnx and adamw.onnx are already a
# training step and an optimizer step (com.microsoft gradient ops), not a model
# to train; ort-transformers/gpt2_past.onnx is not valid ONNX (two nodes write '284').
for m in ort-training/training_model.onnx ort-training/adamw.onnx ort-transformers/gpt2_past.onnx; do
    echo "| $m | not a model to train (see the script) | | | | | | | | |"
done
if [ -n "$ZOO" ] && [ -f "$ZOO/options.txt" ]; then
    while read -r f opts; do
        # shellcheck disable=SC2086 # the options are words
        row "$ZOO/$f" 70% $opts
    done <"$ZOO/options.txt"
fi
rm -rf "$OUT"
