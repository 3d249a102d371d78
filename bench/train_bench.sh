#!/bin/sh
# train_bench.sh - time and peak RSS of building and analysing the training step (`memplan MODEL --batch N`).
#
#   bench/train_bench.sh [MEMPLAN_BIN]     (default: build/memplan)
#
# Best of 5 wall-clock runs of the whole process; peak RSS from GNU time. The gpt2_medium_like export
# (3,571 nodes) is made by bench/export_models.py into $BENCH_DIR (needs python3-torch; skipped otherwise).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build/memplan}
SHARED=$ROOT/../shared
BENCH_DIR=${BENCH_DIR:-/tmp/memplan-bench}
[ -x "$BIN" ] || { echo "train_bench: no memplan binary at $BIN" >&2; exit 2; }
if [ ! -f "$BENCH_DIR/gpt2_medium_like_train.onnx" ] && /usr/bin/python3 -c "import torch, onnx" 2>/dev/null; then
    /usr/bin/python3 "$ROOT/bench/export_models.py" "$BENCH_DIR" >&2 || true
fi

ms_now() { date +%s%N; }
row() { # name file args...
    name=$1 file=$2
    shift 2
    [ -f "$file" ] || { echo "| $name | absent | | | |"; return; }
    best=""
    for _ in 1 2 3 4 5; do
        s=$(ms_now)
        "$BIN" "$file" "$@" >/dev/null 2>&1 || { echo "| $name | error: $("$BIN" "$file" "$@" 2>&1 | head -c 100) | | | |"; return; }
        t=$(( ($(ms_now) - s) / 1000000 ))
        [ -z "$best" ] || [ "$t" -lt "$best" ] && best=$t
    done
    rss=$(/usr/bin/time -v "$BIN" "$file" "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p')
    steps=$("$BIN" "$file" "$@" | sed -n 's/^nodes *\([0-9]*\).*/\1/p')
    echo "| $name | $steps | $best | $(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }') | $* |"
}

echo "| model | training-step nodes | time ms | peak RSS MiB | arguments |"
echo "|---|---:|---:|---:|---|"
row gpt2_medium_like_train "$BENCH_DIR/gpt2_medium_like_train.onnx" --batch 4 --dim sequence=1024
row gpt2_small_like_train "$SHARED/models/torch/gpt2_small_like_train.onnx" --batch 4 --dim sequence=1024
row vit_b_16_train "$SHARED/models/torch/vit_b_16_train.onnx" --batch 32
row resnet50_train "$SHARED/models/torch/resnet50_train.onnx" --batch 32
row gpt2_124m "$ROOT/models/gpt2_124m.onnx" --batch 4 --dim sequence=1024
