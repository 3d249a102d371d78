#!/bin/sh
# alloc_bench.sh - the static arena (passes/arena.h) on every instance of ../shared/alloc-benchmarks, then on
# the training steps of ../shared/models/torch at the batch sizes of ../shared/peers/torch-cpu.txt.
#
#   bench/alloc_bench.sh [BUILD_DIR] [--time-limit SEC] [--no-models]      (default: build, 10 s of search)
#
# Prints the markdown tables of docs/benchmarks.md; exits 1 if an assignment fails the offset verifier.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    BUILD=$1
    shift
fi
LIMIT=10
MODELS=1
while [ $# -gt 0 ]; do
    case $1 in
    --time-limit) LIMIT=$2; shift 2 ;;
    --no-models) MODELS=0; shift ;;
    *) echo "alloc_bench: unknown argument $1" >&2; exit 2 ;;
    esac
done
BIN=$BUILD/memplan-alloc-bench
[ -x "$BIN" ] || { echo "alloc_bench: no $BIN (cmake --build $BUILD --target memplan-alloc-bench)" >&2; exit 2; }
SUITE=$ROOT/../shared/alloc-benchmarks
status=0
if [ -d "$SUITE" ]; then
    echo "| instance | buffers | lower bound | best known | arena | / best known | / lower bound | method" \
        "| search nodes | ms |"
    echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"
    LIST=$(mktemp)
    find "$SUITE" -name '*.csv' | sort >"$LIST"
    while read -r f; do "$BIN" --time-limit "$LIMIT" "$f" || status=1; done <"$LIST"
    rm -f "$LIST"
else
    echo "alloc_bench: $SUITE is absent, skipped"
fi
TORCH=$ROOT/../shared/models/torch
[ "$MODELS" = 1 ] || exit $status
if [ -d "$TORCH" ]; then
    echo
    echo "| training step (AdamW, 256-byte alignment) | buffers | lower bound | best known | arena | / best known" \
        "| / lower bound | method | search nodes | ms | beside the arena |"
    echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"
    # batch sizes (and sequence length) of ../shared/peers/torch-cpu.txt
    for spec in "gpt2_small_like_train --batch 1 --dim sequence=512" "mobilenet_v3_large_train --batch 32" \
                "resnet50_train --batch 32" "vgg16_train --batch 16" "vit_b_16_train --batch 4"; do
        set -- $spec
        m=$1
        shift
        [ -f "$TORCH/$m.onnx" ] || continue
        "$BIN" --time-limit "$LIMIT" --model "$TORCH/$m.onnx" "$@" || status=1
    done
else
    echo "alloc_bench: $TORCH is absent, skipped"
fi
exit $status
