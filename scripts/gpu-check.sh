#!/usr/bin/env bash
# gpu-check.sh - the executable plans on a CUDA machine, in under 5 minutes:
#   1. builds memplan and memplan-run (Release);
#   2. mlp.onnx: plans it with -o, builds plan.cu with nvcc, runs a few steps on
#      the GPU and on the CPU backend (same seeded weights and data), compares
#      the losses (fp32 GEMMs differ in summation order: relative 1e-3);
#   3. gpt2_124m (batch 4, sequence 1024) and ResNet-50 (../shared/models/torch/
#      resnet50_train.onnx: BatchNormalization in training mode, batch 32):
#      plans them with -o and builds and runs plan.cu when codegen supports
#      every op (today it does not: codegen names the first op without a CUDA
#      kernel, and the planned arena is still printed);
#   4. prints step time, the planned arena and lower bound, and the memory the
#      one cudaMalloc took (cudaMemGetInfo before and after).
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (env: NVCC, STEPS, OUT, SKIP_BUILD)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
STEPS=${STEPS:-3}
OUT=${OUT:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
SHARED=$ROOT/../shared
status=0
start=$(date +%s)

say() { printf '%s\n' "$*"; }
elapsed() { echo $(($(date +%s) - start)); }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
[ -x "$NVCC" ] || { say "gpu-check: no nvcc ($NVCC)"; exit 2; }

if [ -z "${SKIP_BUILD:-}" ]; then # SKIP_BUILD=1: BUILD_DIR is already built
    say "== build ($BUILD)"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build "$BUILD" -j"$(nproc)" --target memplan memplan-run >"$OUT/build.log" 2>&1 ||
        { tail -20 "$OUT/build.log"; exit 1; }
fi
MEMPLAN=$BUILD/memplan
RUN=$BUILD/memplan-run

# plan NAME MODEL ARGS...: memplan MODEL ARGS -o OUT/NAME, then make and run plan.cu
plan() {
    local name=$1 model=$2
    shift 2
    say "== $name: $(basename "$model") $*"
    if [ ! -f "$model" ]; then say "  skipped: $model is absent"; return 0; fi
    timeout 120 "$MEMPLAN" "$model" "$@" -o "$OUT/$name" >"$OUT/$name.plan.txt" 2>"$OUT/$name.plan.err"
    local rc=$?
    grep -h '^plan:' "$OUT/$name.plan.err" | sed 's/^/  /'
    if [ ! -f "$OUT/$name/plan.json" ]; then
        say "  planning failed: $(tail -1 "$OUT/$name.plan.err")"
        status=1
        return 1
    fi
    if [ $rc -ne 0 ] || [ ! -f "$OUT/$name/plan.cu" ]; then
        say "  codegen: $(grep -v '^plan:' "$OUT/$name.plan.err" | tail -1)"
        return 1
    fi
    if ! timeout 120 make -s -C "$OUT/$name" NVCC="$NVCC" NVCCFLAGS="-O2" >"$OUT/$name.make.log" 2>&1; then
        say "  nvcc failed:"; tail -5 "$OUT/$name.make.log"; status=1; return 1
    fi
    timeout 60 "$OUT/$name/plan" --steps "$STEPS" >"$OUT/$name.gpu.txt" 2>&1 || { cat "$OUT/$name.gpu.txt"; status=1; return 1; }
    sed 's/^/  gpu: /' "$OUT/$name.gpu.txt"
    return 0
}

losses() { grep -o '"loss": [-0-9.e+]*' "$1" | awk '{print $2}'; }

if plan mlp "$ROOT/models/mlp.onnx" --batch 64 --budget 1GB --reserve 0; then
    "$OUT/mlp/plan" --steps "$STEPS" --json >"$OUT/mlp.gpu.json"
    "$RUN" "$OUT/mlp" --steps "$STEPS" --json --random-weights >"$OUT/mlp.cpu.json" || status=1
    paste <(losses "$OUT/mlp.cpu.json") <(losses "$OUT/mlp.gpu.json") | awk -v s=0 '
        { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > m) m = r;
          printf "  step %d: loss cpu %.6f gpu %.6f (relative %.2e)\n", NR, $1, $2, r }
        END { if (NR == 0 || m > 1e-3) { print "  MISMATCH: CPU and GPU losses differ"; exit 1 } else print "  cpu and gpu agree (relative <= 1e-3)" }' ||
        status=1
    grep -o '"arena_bytes": [0-9]*\|"measured_peak_bytes": [0-9]*' "$OUT/mlp.cpu.json" | sed 's/^/  cpu: /'
fi
plan gpt2_124m "$ROOT/models/gpt2_124m.onnx" --batch 4 --dim sequence=1024 --budget 100GB --gpu h200
plan resnet50 "$SHARED/models/torch/resnet50_train.onnx" --batch 32 --budget 100GB --gpu h200

say "== done in $(elapsed) s; files in $OUT"
exit $status
