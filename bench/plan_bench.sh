#!/bin/sh
# plan_bench.sh - planning time and quality on real training steps: for each
# model and budget (a fraction of the store-everything peak), the wall time of
# the whole command (import, training step, ILP, baselines), the recompute
# overhead of the plan, the bound on every plan's (solver.any_plan_bound), the
# sqrt, greedy and lookahead baselines' overhead, and the MIP gap.
#
#   bench/plan_bench.sh [BUILD_DIR] [EXTRA_MODELS_DIR]
#
# Models: ../shared/models/torch (ResNet-50, GPT-2-small class, ViT-B/16);
# EXTRA_MODELS_DIR may hold swin_t.onnx and zoo/ (bench/export_models.py [--zoo] makes them).
# Needs python3 only to read the JSON (any python3). Skips what is absent.
set -eu
BUILD=${1:-build}
EXTRA=${2:-}
M="$BUILD/memplan"
SHARED="$(dirname "$0")/../../shared/models/torch"
[ -x "$M" ] || { echo "plan_bench: build first ($M missing)"; exit 1; }

row() { # name, model args..., then budgets after --
    name=$1; shift
    args=""
    while [ "$1" != "--" ]; do args="$args $1"; shift; done
    shift
    for b in "$@"; do
        t0=$(date +%s.%N)
        if out=$($M $args --budget "$b%" --reserve 0 --json 2>/tmp/plan_bench.err); then
            t1=$(date +%s.%N)
            echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin); p = d["plan"]; s = d["solver"]; b = d["baselines"]
def o(k):
    r = b.get(k)
    return "%.2f" % r["recompute_overhead_pct"] if r and r["peak_bytes"] <= p["usable_bytes"] else "-"
gap = "%.2f %%" % (100 * s["mip_gap"]) if s["mip_gap"] is not None else "-"
anyb = "%.2f" % (100 * s["any_plan_bound"] / p["step_cost"]) if s.get("any_plan_bound") is not None else "-"
print("| %s | %s %% | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s |" % (sys.argv[1], sys.argv[2], float(sys.argv[3]),
      p["recompute_overhead_pct"], anyb, p["order_from"], o("sqrt"), o("greedy"), o("lookahead"), s["status"], gap))
' "$name" "$b" "$(echo "$t1 - $t0" | bc)"
        else
            t1=$(date +%s.%N)
            why=$(sed -n 's/.*\(smallest feasible budget [^;]*\).*/\1/p' /tmp/plan_bench.err | cut -c1-90)
            [ -n "$why" ] || why=$(tail -n 1 /tmp/plan_bench.err | sed 's/^memplan: [^:]*: //' | cut -c1-90)
            printf '| %s | %s %% | %.2f | no plan: %s |\n' "$name" "$b" "$(echo "$t1 - $t0" | bc)" "$why"
        fi
    done
}

echo "| model | budget | wall s | ILP overhead % | any plan >= % | order from | sqrt % | greedy % | lookahead % | solver | gap |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---|---:|"
if [ -d "$SHARED" ]; then
    row "resnet50_train b32" "$SHARED/resnet50_train.onnx" --batch 32 -- 90 70 50
    row "gpt2_small_like_train b4 s1024" "$SHARED/gpt2_small_like_train.onnx" --batch 4 --dim sequence=1024 -- 90 70 60 50 45 42 41 40
    row "vit_b_16_train b32" "$SHARED/vit_b_16_train.onnx" --batch 32 -- 90 70 50
else
    echo "plan_bench: $SHARED absent, shared models skipped" >&2
fi
if [ -n "$EXTRA" ] && [ -f "$EXTRA/swin_t.onnx" ]; then
    row "swin_t b8 (6,556-node forward)" "$EXTRA/swin_t.onnx" --batch 8 -- 90 70 50
fi
# the zoo of bench/export_models.py --zoo: each model with its options, at three budgets
if [ -n "$EXTRA" ] && [ -f "$EXTRA/zoo/options.txt" ]; then
    while read -r file opts; do
        # shellcheck disable=SC2086
        row "$(basename "$file" _train.onnx) $(echo $opts | sed 's/--batch /b/; s/--dim [a-z]*=/s/')" "$EXTRA/zoo/$file" $opts -- 70 50 30
    done < "$EXTRA/zoo/options.txt"
fi
