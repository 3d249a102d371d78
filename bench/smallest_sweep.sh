#!/bin/sh
# smallest_sweep.sh - plans near each model's smallest feasible budget, where
# the ILP's space is empty, the plans fragment and the fallbacks are placed:
# the 25 training steps of docs/benchmarks.md at 1.000, 1.003, 1.03, 1.10 and
# 1.20 times the smallest feasible budget the exit-3 line states (its upper
# end, from the first build). Per plan: the overhead, where the order came
# from, the wall time; with a second build, the same beside it, run one after
# the other. A model whose overhead rises with the budget is marked "RISES".
#
#   bench/smallest_sweep.sh [BUILD_DIR] [EXTRA_MODELS_DIR] [OTHER_BUILD_DIR]
#
# Models: ../shared/models/torch, and from EXTRA_MODELS_DIR Swin-T and the zoo
# (bench/export_models.py DIR --zoo); absent ones are skipped. Needs python3
# only to read the JSON. FACTORS (environment) overrides the budgets.
set -eu
BUILD=${1:-build}
EXTRA=${2:-}
OTHER=${3:-}
FACTORS=${FACTORS:-1.000 1.003 1.03 1.10 1.20}
SHARED="$(dirname "$0")/../../shared/models/torch"
[ -x "$BUILD/memplan" ] || { echo "smallest_sweep: build first ($BUILD/memplan missing)"; exit 1; }

one() { # memplan, budget bytes, model args...: "overhead from seconds"
    m=$1 b=$2
    shift 2
    s=$(date +%s.%N)
    if out=$("$m" "$@" --budget "${b}B" --reserve 0 --json 2>/dev/null); then
        r=$(echo "$out" | python3 -c 'import json,sys; p=json.load(sys.stdin)["plan"]; print("%.2f %s" % (p["recompute_overhead_pct"], p["order_from"]))')
    else
        r="exit $?"
    fi
    e=$(date +%s.%N)
    echo "$r $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }')"
}

model() { # label, file, args...
    label=$1 f=$2
    shift 2
    [ -f "$f" ] || { echo "| $label | skipped: $f absent |"; return 0; }
    # the smallest feasible budget: "is N bytes", or the upper end of "lies between N and M bytes"
    line=$("$BUILD/memplan" "$f" "$@" --budget 1B --reserve 0 2>&1 >/dev/null || true)
    u=$(echo "$line" | grep -oE "(is|and) [0-9]+ bytes" | tail -n 1 | grep -oE "[0-9]+" || true)
    [ -n "$u" ] || { echo "| $label | no smallest budget stated: $line |"; return 0; }
    last=""
    for k in $FACTORS; do
        b=$(python3 -c "import math; print(math.ceil($u * $k))")
        a=$(one "$BUILD/memplan" "$b" "$f" "$@")
        o=${a%% *}
        mark=""
        if [ -n "$last" ] && python3 -c "import sys; sys.exit(0 if float('$o') > float('$last') + 1e-9 else 1)" 2>/dev/null; then
            mark=" RISES"
            rises=$((rises + 1))
        fi
        case $o in exit) ;; *) last=$o ;; esac
        row="| $label | $k | $a$mark |"
        [ -z "$OTHER" ] || row="$row $(one "$OTHER/memplan" "$b" "$f" "$@") |"
        echo "$row"
    done
}

rises=0
if [ -z "$OTHER" ]; then
    echo "| model | x smallest | overhead %, order from, s |"
    echo "|---|---:|---|"
else
    echo "| model | x smallest | overhead %, order from, s | $OTHER: overhead %, order from, s |"
    echo "|---|---:|---|---|"
fi
model "resnet50 b32" "$SHARED/resnet50_train.onnx" --batch 32
model "gpt2_small b4 s1024" "$SHARED/gpt2_small_like_train.onnx" --batch 4 --dim sequence=1024
model "mobilenet_v3_large b32" "$SHARED/mobilenet_v3_large_train.onnx" --batch 32
model "vit_b_16 b32" "$SHARED/vit_b_16_train.onnx" --batch 32
model "vgg16 b16" "$SHARED/vgg16_train.onnx" --batch 16
if [ -n "$EXTRA" ]; then
    model "swin_t b8" "$EXTRA/swin_t.onnx" --batch 8
    Z="$EXTRA/zoo"
    for m in efficientnet_b0 convnext_tiny densenet121 regnet_y_400mf shufflenet_v2_x1_0 squeezenet1_1 googlenet \
        mnasnet0_5 resnext50_32x4d; do
        model "$m b8" "$Z/${m}_train.onnx" --batch 8
    done
    model "maxvit_t b2" "$Z/maxvit_t_train.onnx" --batch 2
    model "r3d_18 b2" "$Z/r3d_18_train.onnx" --batch 2
    model "llama_like b4 s256" "$Z/llama_like_train.onnx" --batch 4 --dim sequence=256
    model "lstm_tagger b8 s32" "$Z/lstm_tagger_train.onnx" --batch 8 --dim sequence=32
    model "gru_bi b8" "$Z/gru_bi_train.onnx" --batch 8
    model "unet_small b4" "$Z/unet_small_train.onnx" --batch 4
    model "audionet b8" "$Z/audionet_train.onnx" --batch 8
    model "srnet b8" "$Z/srnet_train.onnx" --batch 8
    model "seq2seq b16 s24" "$Z/seq2seq_train.onnx" --batch 16 --dim sequence=24
    model "misc b16" "$Z/misc_train.onnx" --batch 16
fi
[ "$rises" -eq 0 ] || { echo "smallest_sweep: $rises budgets gave more overhead than a smaller one"; exit 1; }
