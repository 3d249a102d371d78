#!/bin/sh
# in_backward_bench.sh - what --optimizer-in-backward (each update as soon as
# its gradient is final) changes: the store-everything peak, the smallest
# feasible budget (the exit-3 line at a budget of 1 MiB; "a-b" where it is a
# range), and the recompute overhead at one budget in bytes, 50 % of the
# default step's store-everything peak, planned by the whole command (the
# plan's step: it keeps the gradients, or with the option the updated
# parameters, as outputs).
#
#   bench/in_backward_bench.sh [BUILD_DIR] [EXTRA_MODELS_DIR]
#
# Models: ../shared/models/torch; EXTRA_MODELS_DIR may hold swin_t.onnx
# (bench/export_models.py). Needs python3 only to read the JSON.
set -u
BUILD=${1:-build}
EXTRA=${2:-}
M="$BUILD/memplan"
S="$(dirname "$0")/../../shared/models/torch"
[ -x "$M" ] || { echo "in_backward_bench: build first ($M missing)"; exit 1; }
F=--optimizer-in-backward
mib() { python3 -c "import sys; print('%.2f' % (int(sys.argv[1]) / 2**20))" "$1"; }
smallest() { # the exit-3 line's smallest feasible budget, MiB ("lo-hi" for a range)
    "$M" "$@" --budget 1MiB --reserve 0 2>&1 >/dev/null | python3 -c '
import re, sys
t = sys.stdin.read()
m = re.search(r"smallest feasible budget is (\d+)", t) or re.search(r"smallest feasible budget lies between (\d+) and (\d+)", t)
print("-".join("%.2f" % (int(g) / 2**20) for g in m.groups()) if m else "?")'
}
field() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
row() { # name, model args...
    name=$1
    shift
    "$M" "$@" --budget 50% --reserve 0 --json >/tmp/in_backward_bench.json 2>/dev/null
    base=$(field 'd["baselines"]["none"]["peak_bytes"]' </tmp/in_backward_bench.json)
    b=$(field 'd["plan"]["usable_bytes"]' </tmp/in_backward_bench.json)
    o0=$(field '"%.2f" % d["plan"]["recompute_overhead_pct"]' </tmp/in_backward_bench.json)
    "$M" "$@" $F --budget "${b}B" --reserve 0 --json >/tmp/in_backward_bench.json 2>/dev/null
    fused=$(field 'd["baselines"]["none"]["peak_bytes"]' </tmp/in_backward_bench.json)
    o1=$(field '"%.2f" % d["plan"]["recompute_overhead_pct"]' </tmp/in_backward_bench.json)
    echo "| $name | $(mib "$base") | $(mib "$fused") | $(smallest "$@") | $(smallest "$@" $F) | $(mib "$b") | $o0 | $o1 |"
}
echo "| model | store everything MiB | in the backward | smallest budget MiB | in the backward | budget MiB | overhead % | in the backward |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
if [ -d "$S" ]; then
    row "resnet50_train b32" "$S/resnet50_train.onnx" --batch 32
    row "mobilenet_v3_large_train b32" "$S/mobilenet_v3_large_train.onnx" --batch 32
    row "vit_b_16_train b32" "$S/vit_b_16_train.onnx" --batch 32
    row "gpt2_small_like_train b4 s1024" "$S/gpt2_small_like_train.onnx" --batch 4 --dim sequence=1024
else
    echo "in_backward_bench: $S absent, shared models skipped" >&2
fi
if [ -n "$EXTRA" ] && [ -f "$EXTRA/swin_t.onnx" ]; then
    row "swin_t b8" "$EXTRA/swin_t.onnx" --batch 8
fi
