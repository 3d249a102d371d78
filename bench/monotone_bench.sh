#!/bin/sh
# monotone_bench.sh - the issue's monotonicity target on real training steps: for
# each model, every budget from LO to HI percent of the store-everything peak in
# steps of STEP, the plan's recompute overhead, where its order came from, and the
# wall time; a row whose overhead is above a smaller budget's is marked "RISES"
# and the script exits 1 at the end. Near the smallest feasible budget the plans
# come from the fallbacks (a baseline's order, placed), where a rise is likeliest.
#
#   bench/monotone_bench.sh [BUILD_DIR] [EXTRA_MODELS_DIR]
#
# Models: GPT-2-small class (../shared/models/torch), Swin-T from EXTRA_MODELS_DIR
# (bench/export_models.py makes it). Needs python3 only to read the JSON.
set -eu
BUILD=${1:-build}
EXTRA=${2:-}
M="$BUILD/memplan"
SHARED="$(dirname "$0")/../../shared/models/torch"
[ -x "$M" ] || { echo "monotone_bench: build first ($M missing)"; exit 1; }
rises=0

sweep() { # name, lo, hi, step, model args...
    name=$1 lo=$2 hi=$3 step=$4
    shift 4
    least=""
    b=$lo
    while [ "$b" -le "$hi" ]; do
        t0=$(date +%s.%N)
        if out=$($M "$@" --budget "$b%" --reserve 0 --json 2>/dev/null); then
            t1=$(date +%s.%N)
            row=$(echo "$out" | python3 -c '
import json, sys
p = json.load(sys.stdin)["plan"]
print("%.2f %s" % (p["recompute_overhead_pct"], p["order_from"]))')
            pct=${row% *} from=${row#* }
            mark=""
            if [ -n "$least" ] && [ "$(echo "$pct > $least" | bc)" = 1 ]; then
                mark="RISES (a smaller budget gave $least %)"
                rises=$((rises + 1))
            fi
            if [ -z "$least" ] || [ "$(echo "$pct < $least" | bc)" = 1 ]; then least=$pct; fi
            printf '| %s | %s %% | %s | %s | %.2f | %s |\n' "$name" "$b" "$pct" "$from" "$(echo "$t1 - $t0" | bc)" "$mark"
        else
            printf '| %s | %s %% | no plan | | | |\n' "$name" "$b"
        fi
        b=$((b + step))
    done
}

echo "| model | budget | overhead % | order from | wall s | |"
echo "|---|---:|---:|---|---:|---|"
if [ -d "$SHARED" ]; then
    sweep "gpt2_small_like_train b4 s1024" 40 60 1 "$SHARED/gpt2_small_like_train.onnx" --batch 4 --dim sequence=1024
else
    echo "monotone_bench: $SHARED absent, GPT-2 skipped" >&2
fi
if [ -n "$EXTRA" ] && [ -f "$EXTRA/swin_t.onnx" ]; then
    sweep "swin_t b8" 50 70 1 "$EXTRA/swin_t.onnx" --batch 8
fi
[ "$rises" -eq 0 ] || { echo "monotone_bench: $rises budgets gave more overhead than a smaller one" >&2; exit 1; }
