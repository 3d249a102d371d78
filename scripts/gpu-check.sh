#!/usr/bin/env bash
# gpu-check.sh - the executable plans on a CUDA machine, in under 5 minutes.
#
#   scripts/gpu-check.sh prepare [DIR]   plans here (no GPU needed): memplan -o for each case below,
#                                        and the CPU backend's losses of the small cases (cpu.json)
#   scripts/gpu-check.sh run [DIR]       on the GPU: nvcc builds the runtime once (cuBLAS, cuDNN when
#                                        found), links each DIR/CASE/plan.cu, runs it, prints the table
#   scripts/gpu-check.sh [all] [DIR]     both, on a machine that has memplan's build dependencies and a GPU
#
# DIR defaults to build-gpucheck (git-ignored: on a device lease, `run` needs it carried). The cases:
#   mlp, cnn_bn (a rematerialized plan), gpt_decoder (rows long enough for the GPU's block-per-row
#     softmax and LayerNorm): small; their GPU losses must match the CPU
#     backend's (memplan-run --random-weights, the same seeded weights and data) to 1e-4 relative
#     (fp32 without TF32; sums in other orders, atomics in GatherGrad), cnn_bn also on the direct
#     convolution kernels (MP_CU_NO_CUDNN=1); ppocr_det (PP-OCRv4's detector, batch 2, 320 x 320:
#     Resize, ConvTranspose on cuDNN's backward data, ReduceMean) small too, also on the direct kernels;
#   gpt2_124m (batch 4, sequence 1024) and ResNet-50 (../shared/models/torch/resnet50_train.onnx,
#     batch 32), store-everything plans, and gpt2_124m at half its peak (recomputation).
# For each: step time (median of the steps after the first), the planned arena and lower bound
# (the largest live total), and what the arena's one cudaMalloc took by cudaMemGetInfo.
# With PyTorch on the machine (and EAGER=1, the default), the same models' eager fp32 training step
# time for reference. Env: NVCC, STEPS (default 5), BUILD (default build-gpu), EAGER.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=all
case "${1:-}" in prepare | run | all) MODE=$1; shift ;; esac
DIR=${1:-$ROOT/build-gpucheck}
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac
BUILD=${BUILD:-$ROOT/build-gpu}
STEPS=${STEPS:-5}
SHARED=$ROOT/../shared
[ -d "$SHARED" ] || SHARED=$ROOT/shared
CUDA=$ROOT/runtime/cuda
start=$(date +%s)
say() { printf '%s\n' "$*"; }

# name | model | memplan args | small (compare with the CPU backend)
CASES="mlp|$ROOT/models/mlp.onnx|--batch 64 --budget 1GB|1
cnn_bn|$ROOT/models/cnn_bn.onnx|--batch 16 --budget 80%|1
gpt_decoder|$ROOT/models/gpt_decoder.onnx|--batch 8 --dim sequence=128 --budget 1GB|1
ppocr_det|$SHARED/models/third-party/ppocr-v4/ch_PP-OCRv4_det_infer.onnx|--batch 2 --dim p2o.DynamicDimension.1=320 --dim p2o.DynamicDimension.2=320 --constants-as-params --budget 100GB --gpu h200|1
gpt2_124m|$ROOT/models/gpt2_124m.onnx|--batch 4 --dim sequence=1024 --budget 100GB --gpu h200|0
gpt2_124m_half|$ROOT/models/gpt2_124m.onnx|--batch 4 --dim sequence=1024 --budget 50% --gpu h200|0
resnet50|$SHARED/models/torch/resnet50_train.onnx|--batch 32 --budget 100GB --gpu h200|0"

prepare() {
    say "== prepare: build ($BUILD), plan into $DIR"
    mkdir -p "$DIR"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
        cmake --build "$BUILD" -j"$(nproc)" --target memplan memplan-run >"$DIR/build.log" 2>&1 ||
        { tail -20 "$DIR/build.log"; exit 1; }
    local status=0
    while IFS='|' read -r name model args small; do
        rm -rf "${DIR:?}/$name"
        if [ ! -f "$model" ]; then say "  $name: skipped, $model is absent"; continue; fi
        # shellcheck disable=SC2086
        if ! timeout 300 "$BUILD/memplan" "$model" $args --reserve 0 -o "$DIR/$name" >"$DIR/$name.plan.txt" 2>"$DIR/$name.plan.err" ||
            [ ! -f "$DIR/$name/plan.cu" ]; then
            say "  $name: planning or codegen failed: $(tail -1 "$DIR/$name.plan.err")"
            status=1
            continue
        fi
        say "  $name: $(grep -h '^plan:' "$DIR/$name.plan.err" | sed 's/^plan: //')"
        if [ "$small" = 1 ]; then
            timeout 120 "$BUILD/memplan-run" "$DIR/$name" --steps "$STEPS" --json --random-weights >"$DIR/$name/cpu.json" ||
                { say "  $name: memplan-run failed"; status=1; }
        fi
    done <<<"$CASES"
    return $status
}

run() {
    local NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    [ -x "$NVCC" ] || { say "gpu-check: no nvcc ($NVCC)"; exit 2; }
    [ -d "$DIR" ] || { say "gpu-check: no plans in $DIR (run: scripts/gpu-check.sh prepare)"; exit 2; }
    # cuDNN: the toolkit's, else the one PyTorch's wheel brings
    local dnn_inc="" dnn_lib="" dnn_flags="-DMP_CU_NO_CUDNN" dnn_link=""
    local cudnn_py
    cudnn_py=$(python3 -c 'import nvidia.cudnn as d; print(list(d.__path__)[0])' 2>/dev/null || true)
    if [ -f "$(dirname "$NVCC")/../include/cudnn.h" ]; then
        dnn_flags="" dnn_link="-lcudnn"
    elif [ -n "$cudnn_py" ] && [ -f "$cudnn_py/include/cudnn.h" ] && [ -f "$cudnn_py/lib/libcudnn.so.9" ]; then
        # the wheel ships only the versioned library
        dnn_inc="-I$cudnn_py/include" dnn_lib="-L$cudnn_py/lib -Xlinker -rpath=$cudnn_py/lib" dnn_flags="" dnn_link="-l:libcudnn.so.9"
    fi
    say "== run: nvcc $($NVCC --version | tail -1); cuDNN: ${dnn_link:-none (direct convolution kernels)}"
    local obj=$DIR/obj
    mkdir -p "$obj"
    for src in memplan_cuda mp_cu_cudnn; do
        # shellcheck disable=SC2086
        "$NVCC" -O3 -arch=sm_90 $dnn_inc $dnn_flags -I"$CUDA" -c "$CUDA/$src.cu" -o "$obj/$src.o" 2>"$obj/$src.log" ||
            { cat "$obj/$src.log"; exit 1; }
    done
    local status=0
    while IFS='|' read -r name model args small; do
        local d=$DIR/$name
        [ -f "$d/plan.cu" ] || continue
        # shellcheck disable=SC2086
        if ! timeout 120 "$NVCC" -O2 -arch=sm_90 -I"$CUDA" -o "$d/plan" "$d/plan.cu" "$obj/memplan_cuda.o" "$obj/mp_cu_cudnn.o" \
            -lcublas $dnn_lib $dnn_link >"$d/nvcc.log" 2>&1; then
            say "  $name: nvcc failed:"; tail -5 "$d/nvcc.log"; status=1; continue
        fi
        timeout 120 "$d/plan" --steps "$STEPS" --json >"$d/gpu.json" 2>"$d/gpu.err" ||
            { say "  $name: the plan failed: $(tail -3 "$d/gpu.err")"; status=1; continue; }
        if [ "$name" = cnn_bn ] || [ "$name" = ppocr_det ]; then
            MP_CU_NO_CUDNN=1 timeout 120 "$d/plan" --steps "$STEPS" --json >"$d/gpu_direct.json" 2>"$d/gpu_direct.err" ||
                { say "  $name: the plan failed on the direct kernels: $(tail -3 "$d/gpu_direct.err")"; status=1; }
        fi
    done <<<"$CASES"
    python3 - "$DIR" "$CASES" <<'PY' || status=1
import json, os, re, statistics, sys
root, cases = sys.argv[1], [l.split('|') for l in sys.argv[2].splitlines()]
MiB = 1 << 20
def load(p):
    try: return json.load(open(p))
    except (OSError, ValueError): return None
def conv(d):
    try: m = re.search(r'convolutions: (\d+) on cuDNN, (\d+) on the direct', open(os.path.join(d, 'gpu.err')).read())
    except OSError: m = None
    return f'{m[1]}/{m[2]}' if m else '-'
bad = False
print(f"\n| case | loss first -> last | step s | arena MiB | planned peak (live bytes) MiB | cudaMemGetInfo of the arena MiB | conv cuDNN/direct | vs CPU |")
print("|---|---|---|---|---|---|---|---|")
for name, model, args, small in cases:
    d = os.path.join(root, name); g = load(os.path.join(d, 'gpu.json'))
    if not g: continue
    loss = [s['loss'] for s in g['steps']]; sec = [s['seconds'] for s in g['steps']]
    t = statistics.median(sec[1:]) if len(sec) > 1 else sec[0]
    vs = '-'
    for ref, tag in ((load(os.path.join(d, 'cpu.json')), 'cpu'),):
        if small == '1' and ref:
            rel = max(abs(a - s['loss']) / max(abs(s['loss']), 1e-30) for a, s in zip(loss, ref['steps']))
            vs = f'{rel:.1e}' + (' MISMATCH' if rel > 1e-4 else '')
            bad |= rel > 1e-4
            direct = load(os.path.join(d, 'gpu_direct.json'))
            if direct:
                rd = max(abs(s['loss'] - r['loss']) / max(abs(r['loss']), 1e-30) for s, r in zip(direct['steps'], ref['steps']))
                vs += f'; direct conv {rd:.1e}' + (' MISMATCH' if rd > 1e-4 else '')
                bad |= rd > 1e-4
    print(f"| {name} ({args}) | {loss[0]:.5g} -> {loss[-1]:.5g} | {t:.4f} | {g['arena_bytes'] / MiB:.1f} | "
          f"{g['lower_bound_bytes'] / MiB:.1f} | {g['allocation_bytes'] / MiB:.1f} | {conv(d)} | {vs} |")
sys.exit(1 if bad else 0)
PY
    if [ "${EAGER:-1}" = 1 ] && python3 -c 'import torch, torchvision' 2>/dev/null; then
        say "== PyTorch eager, fp32 (no TF32), the same batches: median step of $STEPS after a warm-up"
        timeout 90 python3 - "$STEPS" <<'PY' || say "  eager reference failed"
import sys, time, torch, torchvision
torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False
steps = int(sys.argv[1]); dev = 'cuda'
def bench(name, model, make_batch, loss_fn):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3); x, y = make_batch(); times = []
    for i in range(steps + 1):
        torch.cuda.synchronize(); t = time.perf_counter()
        opt.zero_grad(set_to_none=True); loss = loss_fn(model(x), y); loss.backward(); opt.step()
        torch.cuda.synchronize(); times.append(time.perf_counter() - t)
    times = sorted(times[1:]); peak = torch.cuda.max_memory_allocated() / 2**20
    print(f"  {name}: {times[len(times) // 2]:.4f} s/step, peak allocated {peak:.1f} MiB"); torch.cuda.reset_peak_memory_stats()
ce = torch.nn.functional.cross_entropy
bench('resnet50 batch 32', torchvision.models.resnet50().to(dev),
      lambda: (torch.randn(32, 3, 224, 224, device=dev), torch.randint(0, 1000, (32,), device=dev)), ce)
try:
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config(n_positions=1024)).to(dev)
    bench('gpt2 124M batch 4 x 1024', m,
          lambda: (torch.randint(0, 50257, (4, 1024), device=dev), torch.randint(0, 50257, (4, 1024), device=dev)),
          lambda out, y: ce(out.logits.reshape(-1, out.logits.shape[-1]), y.reshape(-1)))
except ImportError:
    print("  gpt2: transformers is absent")
PY
    fi
    return $status
}

status=0
if [ "$MODE" != run ]; then prepare || status=1; fi
if [ "$MODE" != prepare ]; then run || status=1; fi
say "== done in $(($(date +%s) - start)) s; files in $DIR"
exit $status
